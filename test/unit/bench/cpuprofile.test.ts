// The CPU profile analyser's per-hop split: a frame of no hop (a native, a Node internal) is charged to its
// nearest caller in a hop, and only what has none counts as the event loop. Also the bench's option checks for
// the issue 22 configurations.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { analyseProfile, HOPS } from '../../bench/cpuprofile';
import { parseOptions } from '../../bench/run';

const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0, columnNumber: 0 });

test('time is split by hop through the call stack', () => {
  const nodes = [
    { id: 1, callFrame: frame('(root)'), children: [2, 5, 7, 9, 10, 11] },
    { id: 2, callFrame: frame('sendMessage', 'file:///x/node_modules/@grpc/grpc-js/build/src/call.js'), children: [3] },
    { id: 3, callFrame: frame('write', 'node:internal/streams/writable'), children: [4] },
    { id: 4, callFrame: frame('writev') }, // native under grpc-js -> gRPC
    { id: 5, callFrame: frame('read', 'file:///x/dist/src/sse/tracker.js'), children: [6] },
    { id: 6, callFrame: frame('parse') }, // JSON.parse under the tracker -> tracking
    { id: 7, callFrame: frame('onStreamRead', 'node:internal/stream_base_commons'), children: [8] },
    { id: 8, callFrame: frame('encodeSirBody', 'file:///x/dist/src/extproc/encode-body.js') },
    { id: 9, callFrame: frame('processTimers', 'node:internal/timers') }, // no hop above -> event loop
    { id: 10, callFrame: frame('(garbage collector)') },
    { id: 11, callFrame: frame('(idle)') },
  ];
  // 1 ms per sample; the idle samples are left out of the busy time.
  const samples = [4, 4, 4, 6, 6, 8, 9, 10, 11, 11];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cpuprofile-')), 'p.cpuprofile');
  fs.writeFileSync(file, JSON.stringify({ nodes, startTime: 0, endTime: 10_000, samples, timeDeltas: samples.map(() => 1000) }));
  try {
    const s = analyseProfile(file);
    expect(s.busyMs).toBe(8);
    const ms = Object.fromEntries(s.hops.map((h) => [h.hop, h.ms]));
    expect(ms).toEqual({ [HOPS.grpc]: 3, [HOPS.track]: 2, [HOPS.encode]: 1, [HOPS.loop]: 1, [HOPS.gc]: 1 });
    expect(s.hops[0]).toEqual({ hop: HOPS.grpc, ms: 3, percent: 37.5 });
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
});

test('the bench knows the configurations n, h and p, and --rounds', () => {
  const o = parseOptions(['--configs', 'a,n,c,h,p', '--rounds', '2', '--previous', 'abc123'], {});
  expect(o.configs).toEqual(['a', 'n', 'c', 'h', 'p']);
  expect(o.rounds).toBe(2);
  expect(o.previousRef).toBe('abc123');
  expect(() => parseOptions(['--configs', 'a,x'], {})).toThrow(/bad configuration x/);
  expect(() => parseOptions(['--rounds', '0'], {})).toThrow(/bad --rounds/);
});
