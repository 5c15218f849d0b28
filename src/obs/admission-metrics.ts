// Metrics and logs of recovery admission, registered where the authority lives: the sidecar's own registry
// with one process, the cluster primary's with WORKERS > 1 (merged into /metrics there), so the numbers are
// the gateway's, not one worker's.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AdmissionAuthority, AdmissionObserver, RefusalReason } from '../recovery/admission';
import type { Logger } from './logger';

export class AdmissionMetrics implements AdmissionObserver {
  private readonly wait: Histogram<'outcome'>;
  private readonly brakeTransitions: Counter<'to'>;

  constructor(
    registry: Registry,
    private readonly log: Logger,
    authority: () => AdmissionAuthority | undefined,
  ) {
    const registers = [registry];
    this.wait = new Histogram({
      name: 'gateway_recovery_wait_seconds',
      help: 'Time a recovery waited for a re-prefill slot (0 when one was free), by outcome (admitted, timed-out).',
      labelNames: ['outcome'],
      buckets: [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.brakeTransitions = new Counter({
      name: 'gateway_recovery_brake_transitions_total',
      help: 'Times the recovery brake opened or closed.',
      labelNames: ['to'],
      registers,
    });
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
      'gateway_reprefills_in_flight',
      'Recovery legs sent and not yet at their first token (re-prefills in flight).',
      (a) => a.inFlight,
    );
    gauge('gateway_reprefills_in_flight_peak', 'The most re-prefills ever in flight at once since start.', (a) => a.peakInFlight);
    gauge(
      'gateway_reprefill_limit',
      'Re-prefills allowed in flight now (RECOVERY_MIN/MAX_CONCURRENT, RECOVERY_BUDGET_PERCENT).',
      (a) => a.limit,
    );
    gauge('gateway_recoveries_waiting', 'Recoveries waiting for a re-prefill slot.', (a) => a.waiting);
    gauge('gateway_recovery_brake_open', '1 while the recovery brake is open or probing (recovery legs keep failing), else 0.', (a) =>
      a.brakeOpen() ? 1 : 0,
    );
  }

  waited(ms: number, admitted: boolean): void {
    this.wait.observe({ outcome: admitted ? 'admitted' : 'timed-out' }, ms / 1000);
  }

  // Refusals are counted where the stream is (gateway_recovery_refusals_total, src/obs/metrics.ts), with the
  // phase only the requester knows.
  refused(_reason: RefusalReason): void {}

  brakeChanged(open: boolean): void {
    this.brakeTransitions.inc({ to: open ? 'open' : 'closed' });
    if (open)
      this.log.warn({ decision: 'BRAKE_OPEN' }, 'recovery legs keep failing: recoveries stop for a while, affected streams end now');
    else this.log.info({ decision: 'BRAKE_CLOSED' }, 'a probe recovery got its first token: recoveries start again');
  }
}
