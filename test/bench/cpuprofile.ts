// A tiny .cpuprofile analyser (the JSON `node --cpu-prof` writes): self time per function (sum of the sample
// intervals whose leaf is that function), and per "area" (our code by folder, each npm package, Node internals,
// GC / idle / program). CLI: node dist/test/bench/cpuprofile.js <file.cpuprofile> [top=25]
import * as fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTimeRow {
  name: string;
  where: string;
  area: string;
  selfMs: number;
  percent: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Sampled time not in (idle): what the process actually spent CPU on. */
  busyMs: number;
  top: SelfTimeRow[];
  areas: Array<{ area: string; selfMs: number; percent: number }>;
  /** Busy time per hop of the data path (hopOf, attributed through the call stack). */
  hops: Array<{ hop: string; ms: number; percent: number }>;
}

/**
 * The data path's hops as the sidecar sees them, by the code a frame belongs to. A frame of none of them (Node
 * internals, natives such as JSON.parse or Buffer copies) is charged to its nearest caller that belongs to one,
 * so a socket write grpc-js asks for counts as gRPC; what has no such caller is the event loop and sockets.
 */
export const HOPS = {
  grpc: 'ext_proc gRPC stream (src/extproc, grpc-js, node:http2)',
  encode: 'encoding of ext_proc messages (src/extproc/encode-body.ts)',
  sse: 'SSE parsing (src/sse/parser.ts)',
  track: 'chunk tracking (src/sse/tracker.ts, its JSON.parse)',
  undici: 'legs: undici and src/upstream (to the egress; llhttp on HTTP/1.1)',
  relay: 'relay and request state (src/stream, src/recovery, src/openai, ...)',
  log: 'logging and metrics (pino, prom-client, src/obs)',
  loop: 'Node event loop, sockets, timers (no hop above it)',
  gc: 'GC',
  native: 'native, unattributed ((program))',
} as const;

export function hopOf(cf: CallFrame): string | null {
  const u = cf.url;
  if (!u) {
    if (cf.functionName === '(garbage collector)') return HOPS.gc;
    if (cf.functionName === '(program)') return HOPS.native;
    return null;
  }
  if (u.includes('/src/extproc/encode-body')) return HOPS.encode;
  if (u.includes('/src/extproc/') || u.includes('@grpc/') || u.includes('protobufjs') || u.includes('internal/http2')) return HOPS.grpc;
  if (u.includes('/src/sse/parser')) return HOPS.sse;
  if (u.includes('/src/sse/tracker')) return HOPS.track;
  if (u.includes('/undici/') || u.includes('/src/upstream/')) return HOPS.undici;
  if (u.includes('/pino') || u.includes('prom-client') || u.includes('/src/obs/')) return HOPS.log;
  if (/\/src\/[^/]+\//.test(u) && !u.includes('node_modules')) return HOPS.relay;
  return null;
}

/** Where a frame's code lives, coarse enough to answer "where does the time go". */
export function areaOf(cf: CallFrame): string {
  const name = cf.functionName;
  if (!cf.url) {
    if (name === '(garbage collector)') return 'GC';
    if (name === '(idle)') return 'idle';
    if (name === '(program)') return 'program (native, unattributed)';
    if (name === '(root)') return 'root';
    return `native: ${name || '(anonymous)'}`;
  }
  const url = cf.url.replace(/^file:\/\//, '');
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return `npm: ${nm[1]}`;
  if (url.startsWith('node:')) return `node: ${url.slice(5).split('/').slice(0, 2).join('/')}`;
  const src = /\/dist\/(src\/[^/]+)\//.exec(url) ?? /\/(src\/[^/]+)\//.exec(url);
  if (src) return `ours: ${src[1]}`;
  return url;
}

export function analyseProfile(file: string, topN = 25): ProfileSummary {
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const hopMemo = new Map<number, string>();
  const hopFor = (id: number): string => {
    const known = hopMemo.get(id);
    if (known) return known;
    const own = hopOf((byId.get(id) as ProfileNode).callFrame);
    const up = parent.get(id);
    const h = own ?? (up === undefined ? HOPS.loop : hopFor(up));
    hopMemo.set(id, h);
    return h;
  };
  const hopMs = new Map<string, number>();
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time between sample i-1 and sample i; attribute it to sample i's node.
  for (let i = 0; i < p.samples.length; i++) {
    const d = p.timeDeltas[i] ?? 0;
    selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + Math.max(0, d));
  }
  const fnMs = new Map<string, SelfTimeRow>();
  const areaMs = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const cf = (byId.get(id) as ProfileNode).callFrame;
    const ms = us / 1000;
    total += ms;
    const area = areaOf(cf);
    if (area === 'idle') idle += ms;
    else {
      const h = hopFor(id);
      hopMs.set(h, (hopMs.get(h) ?? 0) + ms);
    }
    areaMs.set(area, (areaMs.get(area) ?? 0) + ms);
    const where = cf.url ? `${cf.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${cf.lineNumber + 1}` : '';
    const key = `${cf.functionName}|${where}`;
    const row = fnMs.get(key) ?? { name: cf.functionName || '(anonymous)', where, area, selfMs: 0, percent: 0 };
    row.selfMs += ms;
    fnMs.set(key, row);
  }
  const busy = total - idle;
  const pct = (ms: number) => Math.round((1000 * ms) / (busy || 1)) / 10;
  const top = [...fnMs.values()]
    .filter((r) => r.area !== 'idle')
    .sort((a, b) => b.selfMs - a.selfMs)
    .slice(0, topN)
    .map((r) => ({ ...r, selfMs: Math.round(r.selfMs * 10) / 10, percent: pct(r.selfMs) }));
  const areas = [...areaMs.entries()]
    .filter(([a]) => a !== 'idle')
    .sort((a, b) => b[1] - a[1])
    .map(([area, ms]) => ({ area, selfMs: Math.round(ms * 10) / 10, percent: pct(ms) }));
  const hops = [...hopMs.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([hop, ms]) => ({ hop, ms: Math.round(ms * 10) / 10, percent: pct(ms) }));
  return { file, totalMs: Math.round(total), busyMs: Math.round(busy), top, areas, hops };
}

export function formatProfile(s: ProfileSummary, areasN = 15): string {
  const lines: string[] = [];
  lines.push(`CPU profile ${s.file}: ${s.busyMs} ms busy of ${s.totalMs} ms sampled (percentages of busy time)`);
  lines.push('  by hop (self time, natives and Node internals charged to the nearest caller in a hop):');
  for (const h of s.hops) lines.push(`    ${h.percent.toFixed(1).padStart(5)}%  ${String(h.ms).padStart(9)} ms  ${h.hop}`);
  lines.push('  by area (self time):');
  for (const a of s.areas.slice(0, areasN))
    lines.push(`    ${a.percent.toFixed(1).padStart(5)}%  ${String(a.selfMs).padStart(9)} ms  ${a.area}`);
  lines.push('  top functions (self time):');
  for (const r of s.top) lines.push(`    ${r.percent.toFixed(1).padStart(5)}%  ${String(r.selfMs).padStart(9)} ms  ${r.name}  ${r.where}`);
  return lines.join('\n');
}

if (require.main === module) {
  const [file, n] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node dist/test/bench/cpuprofile.js <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${formatProfile(analyseProfile(file, Number(n) || 25))}\n`);
}
