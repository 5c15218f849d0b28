// Keeps `npm run bench` from rotting: the same code path at toy scale (2 levels of a few streams for ~2 s, a
// recovery run of 3 streams, 20 idle streams for the memory figures, a crash-under-load run of 20 streams over
// 4 engine processes) must produce the table with the three configurations, the JSON and the chart, without a
// single stream error. Timings are NOT asserted: this machine's 2 cores are shared with the other suites (the
// benchmark itself checks the speed targets).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type BenchResult, parseOptions, runBench } from '../bench/run';

jest.setTimeout(180_000);

describe('benchmark smoke (npm run bench at toy scale)', () => {
  let out: string;
  let result: BenchResult;
  const lines: string[] = [];

  beforeAll(async () => {
    out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-smoke-'));
    const o = parseOptions(
      [
        '--levels',
        '10,20',
        '--duration',
        '2',
        '--tps',
        '50',
        '--answer',
        '5,10',
        '--engines',
        '1',
        '--recovery',
        '3',
        '--crash',
        '20',
        '--crash-answer',
        '5,75',
        '--idle-streams',
        '20',
        '--ramp-ms',
        '200',
        '--pause-ms',
        '200',
        '--idle-s',
        '0',
        '--out',
        out,
        '--no-docs',
        // (p) from a dist of its own: this checkout's, so that no build runs here (previous-release.ts builds one).
        '--previous-dist',
        path.join(__dirname, '..', '..'),
      ],
      {},
    );
    result = await runBench({ ...o, log: (l) => lines.push(l) });
  });

  afterAll(() => {
    fs.rmSync(out, { recursive: true, force: true });
  });

  it('runs every configuration at every level without errors', () => {
    for (const level of [10, 20]) {
      for (const config of ['a', 'b', 'n', 'c', 'h', 'p'] as const) {
        const run = result.runs.find((r) => r.level === level && r.config === config);
        expect(run).toBeDefined();
        expect({ level, config, errors: run?.errors, samples: run?.errorSamples }).toEqual({ level, config, errors: 0, samples: [] });
        expect(run?.streams).toBeGreaterThanOrEqual(level);
        expect(run?.chunks).toBeGreaterThan(0);
        expect(run?.gaps.n).toBeGreaterThan(0);
      }
    }
  });

  it("prints a table with every configuration, the (c) against (b) comparison and issue 22's table", () => {
    const rows = result.table.split('\n');
    for (const level of ['10', '20']) {
      for (const config of ['a', 'b', 'n', 'c', 'h', 'p']) {
        expect(rows.some((r) => new RegExp(`^\\| ${level}\\s+\\| ${config}\\s+\\|`).test(r))).toBe(true);
      }
    }
    expect(result.table).toContain('p99 c-b');
    // One row per level in issue 22's table, with a native and a previous-release figure.
    const issue = rows.slice(rows.findIndex((r) => r.startsWith('issue 22:')));
    for (const level of ['10', '20']) {
      const row = issue.find((r) => new RegExp(`^\\| ${level}\\s+\\|\\s+1\\s+\\|`).test(r));
      expect(row).toBeDefined();
      expect(row?.split('|').map((c) => c.trim())[4]).toMatch(/^\d+\.\d$/);
      expect(row?.split('|').map((c) => c.trim())[6]).toMatch(/^\d+\.\d$/);
    }
    expect(result.table).toContain('recovery:');
  });

  it('recovers every stream killed mid-answer', () => {
    expect(result.recovery).toBeDefined();
    expect(result.recovery?.errors).toBe(0);
    expect(result.recovery?.complete).toBe(3);
  });

  it('crash under load: one of 4 engine processes SIGKILLed under 20 streams, sidecar defaults: every stream complete, measured from both sides', () => {
    const k = result.crash;
    expect(k).toBeDefined();
    expect({ complete: k?.complete, errors: k?.errors, samples: k?.errorSamples, wrongText: k?.wrongText }).toEqual({
      complete: 20,
      errors: 0,
      samples: [],
      wrongText: 0,
    });
    expect(k?.completePercent).toBe(100);
    expect(k?.streamingAtKill).toBe(20);
    expect(k?.engines).toBe(4);
    // The kill hit the streams of one engine, each continued once; the client saw each continuation start.
    expect(k?.affected).toBeGreaterThan(0);
    expect(k?.affectedComplete).toBe(k?.affected);
    expect(k?.crashToLeg2.n).toBe(k?.affected);
    expect(k?.sidecar.continued).toBe(k?.affected);
    expect(k?.sidecar.admitted).toBeGreaterThanOrEqual(k?.affected ?? Infinity);
    expect(k?.sidecar.queueWait.n).toBe(k?.sidecar.admitted);
    expect(k?.sidecar.timedOut).toBe(0);
    expect(k?.sidecar.refusals).toEqual({});
    // Defaults: 20 streams -> max(3, ceil(20 % of 20)) = 4 re-prefills at once.
    expect(k?.sidecar.reprefillsInFlightMax).toBeGreaterThan(0);
    expect(k?.sidecar.reprefillsInFlightMax).toBeLessThanOrEqual(4);
    expect(k?.node).toBe(process.version);
    expect(result.table).toContain('crash under load:');
    expect(result.targets.find((t) => t.target.startsWith('crash under load'))?.met).toBe(true);
  });

  it('measures memory per idle stream, by RSS and after GC', () => {
    expect(result.idleMemory?.errors).toBe(0);
    expect(result.idleMemory?.kibPerStream).toEqual(expect.any(Number));
    expect(result.idleMemory?.liveKibPerStream).toEqual(expect.any(Number));
    expect(result.table).toContain('idle streams:');
  });

  it('splits the sidecar CPU into relaying alone and a per-stream cost when the level has a churn-free window', () => {
    // 2 s levels with a 200 ms ramp: the window is [1.2 s, 2 s], shorter than a second, so none is taken.
    expect(result.runs.every((r) => r.steady === undefined)).toBe(true);
  });

  it('writes the JSON, the table and the SVG chart', () => {
    const json = JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8'));
    expect(json.runs).toHaveLength(12); // 2 levels x 6 configurations
    expect(json.machine.node).toBe(process.version);
    expect(json.crash.streams).toBe(20);
    expect(fs.readFileSync(path.join(out, 'table.md'), 'utf8')).toContain('| config |');
    const svg = fs.readFileSync(path.join(out, 'gaps-cdf.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('(c) full stack');
  });
});
