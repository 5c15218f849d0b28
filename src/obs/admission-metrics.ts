// Metrics and logs of recovery admission, registered where the authority lives: the sidecar's own registry
// with one process, the cluster primary's with WORKERS > 1 (merged into /metrics there), so the numbers are
// the gateway's, not one worker's.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AdmissionAuthority, AdmissionObserver, RefusalReason } from '../recovery/admission';
import type { Logger } from './logger';

export class AdmissionMetrics implements AdmissionObserver {
  private readonly wait: Histogram<'outcome'>;
  private readonly brakeTransitions: Counter<'to'>;
  private readonly evidence: Counter<'evidence'>;

  constructor(
    registry: Registry,
    private readonly log: Logger,
    authority: () => AdmissionAuthority | undefined,
  ) {
    const registers = [registry];
    this.wait = new Histogram({
      name: 'continuation_gateway_recovery_wait_seconds',
      help: 'Time a recovery waited for a re-prefill slot (0 when one was free), by outcome (admitted, timed-out).',
      labelNames: ['outcome'],
      buckets: [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.brakeTransitions = new Counter({
      name: 'continuation_gateway_recovery_brake_transitions_total',
      help: 'Times the recovery brake opened or closed.',
      labelNames: ['to'],
      registers,
    });
    this.evidence = new Counter({
      name: 'continuation_gateway_recovery_failures_total',
      help: 'Recovery legs failed before their first token, by what they show the brake: pool (counted) or repeat (the request failed so before: counted once per source).',
      labelNames: ['evidence'],
      registers,
    });
    // Every series from the first scrape, at 0 (src/obs/metric-labels.ts says why).
    for (const outcome of ['admitted', 'timed-out']) this.wait.zero({ outcome });
    for (const to of ['open', 'closed']) this.brakeTransitions.inc({ to }, 0);
    for (const evidence of ['pool', 'repeat']) this.evidence.inc({ evidence }, 0);
    admissionGauges(registers, authority);
  }

  waited(ms: number, admitted: boolean): void {
    this.wait.observe({ outcome: admitted ? 'admitted' : 'timed-out' }, ms / 1000);
  }

  // Refusals are counted where the stream is (continuation_gateway_recovery_refusals_total, src/obs/metrics.ts), with the
  // phase only the requester knows.
  refused(_reason: RefusalReason): void {}

  failureEvidence(evidence: 'pool' | 'repeat'): void {
    this.evidence.inc({ evidence });
  }

  // Debug only: under a crash the limit moves with every few recovery legs.
  limitChanged(from: number, to: number, baselineMs: number | undefined, sampleMs: number): void {
    this.log.debug(
      {
        decision: 'REPREFILL_LIMIT',
        from,
        to,
        baseline_ms: baselineMs === undefined ? null : Math.round(baselineMs),
        sample_ms: Math.round(sampleMs),
      },
      'adaptive re-prefill limit changed',
    );
  }

  brakeChanged(open: boolean): void {
    this.brakeTransitions.inc({ to: open ? 'open' : 'closed' });
    if (open)
      this.log.warn({ decision: 'BRAKE_OPEN' }, 'recovery legs keep failing: recoveries stop for a while, affected streams end now');
    else this.log.info({ decision: 'BRAKE_CLOSED' }, 'a probe recovery got its first token: recoveries start again');
  }
}

/** The gauges read the authority at scrape time (0 before it exists: the primary builds it lazily). */
function admissionGauges(registers: Registry[], authority: () => AdmissionAuthority | undefined): void {
  const gauge = (name: string, help: string, read: (a: AdmissionAuthority) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const a = authority();
        this.set(a ? read(a) : 0);
      },
    });
  gauge(
    'continuation_gateway_reprefills_in_flight',
    'Recovery legs sent and not yet at their first token (re-prefills in flight).',
    (a) => a.inFlight,
  );
  gauge(
    'continuation_gateway_reprefills_in_flight_peak',
    'The most re-prefills ever in flight at once since start.',
    (a) => a.peakInFlight,
  );
  gauge(
    'continuation_gateway_reprefill_limit',
    'Re-prefills allowed in flight now (RECOVERY_MIN/MAX_CONCURRENT, RECOVERY_BUDGET_PERCENT; with RECOVERY_ADAPTIVE=true the adaptive limit).',
    (a) => a.limit,
  );
  gauge(
    'continuation_gateway_first_token_baseline_seconds',
    "The pool's normal first-token latency the adaptive re-prefill limit compares recovery legs with (RECOVERY_ADAPTIVE=true; 0 until known).",
    (a) => (a.baselineMs ?? 0) / 1000,
  );
  gauge('continuation_gateway_recoveries_waiting', 'Recoveries waiting for a re-prefill slot.', (a) => a.waiting);
  gauge(
    'continuation_gateway_recovery_brake_open',
    '1 while the recovery brake is open or probing (recovery legs keep failing), else 0.',
    (a) => (a.brakeOpen() ? 1 : 0),
  );
}
