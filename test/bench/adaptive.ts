// `npm run bench:adaptive`: issue 22 item 3 at scale. The crash-under-load run of test/bench/run.ts (N streams
// over 4 engine processes, one SIGKILLed once every stream is streaming) with three admission settings on two
// pools, in one run:
//   fixed 64   the defaults (RECOVERY_MAX_CONCURRENT 64: 64 re-prefills at 1,000 streams)
//   fixed 200  RECOVERY_MAX_CONCURRENT=512: the fixed 20 % of 1,000 streams (what raising the ceiling alone does)
//   adaptive   RECOVERY_ADAPTIVE=true, ceiling 512, RECOVERY_BUDGET_PERCENT=6.4: it starts at 64, like the defaults
// pools (fake engines, tools/fake-engine/prefill.ts):
//   fast       --prefill-ms F: every prefill takes F ms, however many run (capacity to spare)
//   slow       --prefill-ms-per-concurrent S: a first token waits S ms per prefill the replica is running
// Non-recovery traffic: probe streams (short answers, one every PROBE_SPACING_MS) before the load (calm) and
// for PROBE_S seconds from the kill; their first-token latency is what a saturated pool costs everyone else.
//
// Options: those of run.ts for the crash run (--crash, --crash-engines, --crash-answer, --tps, --ramp-ms, --out),
// with these defaults: 1,000 streams, 200-token answers (20,180), 20 tokens/s, ramp 5,000 ms; and
//   BENCH_FAST_PREFILL_MS (300), BENCH_SLOW_PREFILL_MS (10), BENCH_ADAPTIVE_POOLS (fast,slow),
//   BENCH_ADAPTIVE_ADMISSION ("fixed 64,fixed 200,adaptive": which settings, in this order, per pool).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type CrashSummary, Generator, parseOptions, runCrash } from './run';
import { round, type Summary, sortedFloat64, summarize } from './stats';

const PROBE_SPACING_MS = 50;
const PROBE_S = 3;
const CALM_PROBES = 20;

const ADMISSION: Record<string, Record<string, string>> = {
  'fixed 64': {},
  'fixed 200': { RECOVERY_MAX_CONCURRENT: '512' },
  adaptive: { RECOVERY_ADAPTIVE: 'true', RECOVERY_MAX_CONCURRENT: '512', RECOVERY_BUDGET_PERCENT: '6.4' },
};

interface Row {
  pool: string;
  admission: string;
  crash: CrashSummary;
  calm: Summary & { failed: number };
  duringRecovery: Summary & { failed: number };
}

/** One short stream: ms from the send to its first body bytes (the sidecar sends nothing before the first delta). */
async function probeOnce(url: string, n: number): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-fake-answer-tokens': '1,3' },
    body: JSON.stringify({ model: 'bench-model', stream: true, messages: [{ role: 'user', content: `Probe ${n}` }] }),
    signal: AbortSignal.timeout(60_000),
  });
  if (res.status !== 200 || !res.body) throw new Error(`status ${res.status}`);
  const reader = res.body.getReader();
  const first = await reader.read();
  const ms = performance.now() - t0;
  while (!(await reader.read()).done) {
    // drain the rest
  }
  if (first.done) throw new Error('empty body');
  return ms;
}

async function probes(url: string, count: number, tag: string): Promise<Summary & { failed: number }> {
  const runs: Promise<number | undefined>[] = [];
  for (let i = 0; i < count; i++) {
    runs.push(probeOnce(url, i + (tag === 'calm' ? 0 : 100_000)).catch(() => undefined));
    await new Promise((r) => setTimeout(r, PROBE_SPACING_MS));
  }
  const ms = (await Promise.all(runs)).filter((x): x is number => x !== undefined);
  return { ...summarize(sortedFloat64(ms)), failed: count - ms.length };
}

const f0 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '-' : String(Math.round(x)));

export function formatAdaptive(rows: Row[]): string {
  const head = [
    'pool',
    'admission',
    'complete',
    'crash -> leg-2 delta p50 / p99 (ms)',
    'queue wait p99 (ms)',
    'limit max / min after kill / end',
    'in flight max',
    'probe first token calm p50 / p99 (ms)',
    'during recovery p50 / p99 (ms)',
  ];
  const body = rows.map((r) => {
    const sc = r.crash.sidecar;
    return [
      r.pool,
      r.admission,
      `${r.crash.complete}/${r.crash.streams}`,
      `${f0(r.crash.crashToLeg2.p50)} / ${f0(r.crash.crashToLeg2.p99)}`,
      f0(sc.queueWait.p99),
      `${sc.reprefillLimitMax} / ${f0(sc.reprefillLimitMinAfterKill)} / ${f0(sc.reprefillLimitAtEnd)}`,
      String(sc.reprefillsInFlightMax),
      `${f0(r.calm.p50)} / ${f0(r.calm.p99)}${r.calm.failed ? ` (${r.calm.failed} failed)` : ''}`,
      `${f0(r.duringRecovery.p50)} / ${f0(r.duringRecovery.p99)}${r.duringRecovery.failed ? ` (${r.duringRecovery.failed} failed)` : ''}`,
    ];
  });
  const all = [head, ...body];
  const widths = head.map((_, i) => Math.max(...all.map((row) => row[i].length)));
  const line = (row: string[]) => `| ${row.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)].join('\n');
}

async function main(): Promise<void> {
  const env = process.env;
  const o = parseOptions(['--crash-only', ...process.argv.slice(2)], {
    BENCH_CRASH: '1000',
    BENCH_CRASH_ANSWER: '20,180',
    BENCH_RAMP_MS: '5000',
    ...env,
  });
  const fast = ['--prefill-ms', env.BENCH_FAST_PREFILL_MS ?? '300'];
  const slow = ['--prefill-ms-per-concurrent', env.BENCH_SLOW_PREFILL_MS ?? '10'];
  const pools = (env.BENCH_ADAPTIVE_POOLS ?? 'fast,slow').split(',').map((s) => s.trim());
  const log = (l: string) => process.stderr.write(`${l}\n`);
  const generator = await Generator.start();
  const rows: Row[] = [];
  try {
    for (const pool of pools) {
      const order = (env.BENCH_ADAPTIVE_ADMISSION ?? Object.keys(ADMISSION).join(',')).split(',').map((s) => s.trim());
      for (const admission of order) {
        const vars = ADMISSION[admission];
        if (!vars)
          throw new Error(`BENCH_ADAPTIVE_ADMISSION: no setting ${JSON.stringify(admission)} (${Object.keys(ADMISSION).join(', ')})`);
        log(`bench:adaptive: ${pool} pool, ${admission}`);
        let calm: Row['calm'] = { ...summarize(sortedFloat64([])), failed: 0 };
        let during: Promise<Row['duringRecovery']> | undefined;
        const crash = await runCrash(o, generator, log, {
          engineArgs: pool === 'fast' ? fast : slow,
          env: vars,
          beforeLoad: async (url) => {
            calm = await probes(url, CALM_PROBES, 'calm');
          },
          onKill: (url) => {
            during = probes(url, (PROBE_S * 1000) / PROBE_SPACING_MS, 'during');
          },
        });
        const duringRecovery = (await during) ?? { ...summarize(sortedFloat64([])), failed: 0 };
        rows.push({ pool, admission, crash, calm, duringRecovery });
        log(formatAdaptive(rows.slice(-1)));
      }
    }
  } finally {
    await generator.stop();
  }
  const table = formatAdaptive(rows);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').replace(/Z$/, '');
  const out = path.join(path.dirname(o.outDir), `bench-adaptive-${stamp}.json`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const settings = {
    streams: o.crash,
    engines: o.crashEngines,
    answer: o.crashAnswer,
    tps: o.tokensPerSecond,
    rampMs: o.rampMs,
    fast,
    slow,
  };
  fs.writeFileSync(
    out,
    JSON.stringify(
      { settings, rows: rows.map((r) => ({ ...r, calm: roundS(r.calm), duringRecovery: roundS(r.duringRecovery) })) },
      null,
      2,
    ),
  );
  process.stdout.write(`\n${JSON.stringify(settings)}\n${table}\n\nresults: ${out}\n`);
}

function roundS<T extends Summary>(s: T): T {
  const out = { ...s } as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(out)) if (typeof v === 'number') out[k] = round(v, 1);
  return out as unknown as T;
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (e) => {
      process.stderr.write(`bench:adaptive failed: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}
