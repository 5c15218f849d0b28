// A soak with faults (issue 19 "Done when"): N concurrent streams through the real Envoy for D minutes, each
// with a random engine fault (crash, stall, clean EOF, [DONE] without a finish_reason, a partial event that
// trickles, an error event, an abort, or none) at a random token, on leg 1 and sometimes on leg 2 too.
// Every stream must end complete (the canonical answer byte for byte, one id, one finish_reason, one `[DONE]`
// last) or explicitly (the interruption event or an HTTP error with a JSON body). It prints the figures and
// exits 1 on any other ending. Not part of `npm test` (minutes of two busy cores); run by hand:
//   npm run soak -- --minutes 8 --streams 100 [--seed N] [--max-continuations 2]
// Memory (issue 39): `--rounds 3 --idle-seconds 60 --heap-snapshots DIR` runs the sidecar as its own process
// (WORKERS=1, its V8 flags) and runs the soak three times back to back against the same stack. Before the
// first round and after each one's idle time it records the sidecar's and Envoy's RSS and the sidecar's heap
// (prom-client's nodejs_* gauges); before the first round and after the last it writes a heap snapshot of the
// sidecar (SIGUSR2, --heapsnapshot-signal) into DIR; `node dist/test/soak/heap-diff.js A B` compares the two.
// A leak shows as growth from round to round.
// It rests on the fake engine (tools/fake-engine): the faults are ours, Envoy and the sidecar are the real ones.
import fs from 'node:fs';
import path from 'node:path';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';
import { INTERRUPTION_CODE } from '../../src/recovery/interruption';
import { answerFor, prng } from '../../tools/fake-engine/answer';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack } from '../support/stack';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const MINUTES = arg('minutes', 8);
const ROUNDS = arg('rounds', 1);
const IDLE_SECONDS = arg('idle-seconds', 60);
const strArg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const SNAPSHOT_DIR = strArg('heap-snapshots');
/** `--sidecar-env K=V,K2=V2`: extra environment for the sidecar's process (an allocator setting, say). */
const SIDECAR_ENV = Object.fromEntries(
  (strArg('sidecar-env') ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
/** The sidecar its own process: implied by --rounds > 1 or --heap-snapshots (its memory alone is what is asked). */
const OWN_PROCESS = ROUNDS > 1 || SNAPSHOT_DIR !== undefined || process.argv.includes('--sidecar-process');

/** The resident part of glibc's main heap (the brk segment, /proc/<pid>/smaps `[heap]`): what malloc kept. */
function brkHeapRss(pid: number): number {
  const smaps = fs.readFileSync(`/proc/${pid}/smaps`, 'utf8');
  const m = /\[heap\]\n(?:.*\n)*?Rss:\s+(\d+) kB/.exec(smaps);
  return m ? Number(m[1]) * 1024 : 0;
}
const STREAMS = arg('streams', 100);
const SEED = arg('seed', 20261202);
/** 2 by default, so that a fault on leg 2 is continued too; 1 (the gateway's default) ends those explicitly. */
const MAX_CONTINUATIONS = arg('max-continuations', 2);
const TOKENS = 60;

type Rnd = () => number;
const int = (r: Rnd, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

/** One random fault at a random token; the demo's "request" fault scope runs each script per request id. */
function faultFor(r: Rnd): string {
  const at = int(r, 0, TOKENS - 1);
  const pool = [`crash@${at}`, `stall@${at}`, `eof@${at}`, `done@${at}`, `trickle@${at}:300`, `error@${at}`, `abort@${at}`, '-'];
  const leg1 = pool[Math.floor(r() * pool.length)];
  // One stream in five has a second fault on its second leg.
  const leg2 = r() < 0.2 ? pool[Math.floor(r() * pool.length)] : '-';
  return `${leg1};${leg2}`;
}

const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The sidecar's heap figures from its own /metrics (prom-client's default nodejs_* gauges), in bytes. */
async function heapFigures(adminPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const pick = (re: RegExp) => Number(re.exec(text)?.[1] ?? Number.NaN);
  return {
    heapUsed: pick(/^nodejs_heap_size_used_bytes (\S+)$/m),
    heapTotal: pick(/^nodejs_heap_size_total_bytes (\S+)$/m),
    external: pick(/^nodejs_external_memory_bytes (\S+)$/m),
  };
}

/** SIGUSR2 makes the sidecar write a snapshot into SNAPSHOT_DIR (its --diagnostic-dir); waits until it is whole. */
async function heapSnapshot(pid: number, label: string): Promise<string | undefined> {
  if (!SNAPSHOT_DIR) return undefined;
  const before = new Set(fs.readdirSync(SNAPSHOT_DIR));
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 600; i++) {
    await sleep(1000);
    const file = fs.readdirSync(SNAPSHOT_DIR).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (!file) continue;
    const full = path.join(SNAPSHOT_DIR, file);
    const size = fs.statSync(full).size;
    await sleep(2000);
    if (fs.statSync(full).size !== size) continue;
    const named = path.join(SNAPSHOT_DIR, `${label}.heapsnapshot`);
    fs.renameSync(full, named);
    return named;
  }
  return undefined;
}

async function main(): Promise<void> {
  if (SNAPSHOT_DIR) fs.mkdirSync(SNAPSHOT_DIR, { recursive: true });
  const stack = await startTestStack({
    replicas: 2,
    engine: { faultScope: 'request', tokenIntervalMs: 20 },
    env: { LOG_LEVEL: 'warn', STALL_IDLE_TIMEOUT_SECONDS: '3', MAX_CONTINUATIONS: String(MAX_CONTINUATIONS), ...SIDECAR_ENV },
    ...(OWN_PROCESS
      ? {
          sidecarProcess: true,
          sidecarNodeFlags: [
            ...SIDECAR_NODE_FLAGS,
            ...(SNAPSHOT_DIR ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${path.resolve(SNAPSHOT_DIR)}`] : []),
          ],
        }
      : {}),
  });
  const rnd = prng(SEED);
  const counts = { streams: 0, complete: 0, interrupted: 0, errorEvent: 0, httpError: 0, bad: 0 };
  const bad: string[] = [];
  let rssMin = Number.POSITIVE_INFINITY;
  let rssMax = 0;
  // The sidecar's own process, or this one (the sidecar, the fake engines and the load generator together).
  const pid = stack.sidecarPid ?? process.pid;
  const envoyPid = stack.envoy.pid;
  let envoyRssMax = 0;
  let end = 0;
  const sampler = setInterval(() => {
    const v = rss(pid);
    rssMin = Math.min(rssMin, v);
    rssMax = Math.max(rssMax, v);
    envoyRssMax = Math.max(envoyRssMax, rss(envoyPid));
  }, 1000);
  const mb = (b: number) => (b / 1024 / 1024).toFixed(1);
  const checkpoints: string[] = [];
  const checkpoint = async (label: string, snapshot: boolean) => {
    const heap = stack.sidecarAdminPort !== undefined ? await heapFigures(stack.sidecarAdminPort) : undefined;
    const line =
      `  ${label}: sidecar RSS ${mb(rss(pid))} MB (malloc's brk heap ${mb(brkHeapRss(pid))} MB), Envoy RSS ${mb(rss(envoyPid))} MB` +
      (heap ? `, sidecar heap used ${mb(heap.heapUsed)} of ${mb(heap.heapTotal)} MB, external ${mb(heap.external)} MB` : '');
    // Writing a snapshot takes memory of its own that the process keeps: only before the first round and after
    // the last, so that rounds 1 to 3 compare RSS undisturbed.
    const snap = snapshot ? await heapSnapshot(pid, label) : undefined;
    checkpoints.push(line + (snap ? ` (snapshot ${snap})` : ''));
    process.stdout.write(`${checkpoints.at(-1)}\n`);
  };
  if (OWN_PROCESS) {
    await sleep(IDLE_SECONDS * 1000);
    await checkpoint('before', true);
  }

  const one = async (): Promise<void> => {
    const fault = faultFor(rnd);
    const body = chatBody({}, `soak ${int(rnd, 0, 1e9)}`);
    const expected = answerFor(body.messages, { reasoning: 0, content: TOKENS }).contentTokens.join('');
    const id = newRequestId('soak');
    const r = await postChat(stack.url, body, { 'x-request-id': id, 'x-fake-fault': fault, 'x-fake-answer-tokens': `0,${TOKENS}` });
    counts.streams++;
    const afterDone = r.raw.slice(r.raw.indexOf('data: [DONE]') + 'data: [DONE]\n\n'.length);
    const oneDone = r.raw.split('data: [DONE]').length === 2 && afterDone === '';
    if (r.status !== 200) {
      let json = false;
      try {
        json = typeof JSON.parse(r.raw).error === 'object';
      } catch {}
      if (json) counts.httpError++;
      else counts.bad++, bad.push(`${id} ${fault}: HTTP ${r.status} without a JSON error body`);
      return;
    }
    if (!oneDone || r.transportError !== null || r.ids.length !== 1) {
      counts.bad++;
      bad.push(`${id} ${fault}: done=${r.done} oneDone=${oneDone} transport=${r.transportError} ids=${r.ids.length}`);
      return;
    }
    const interruption = r.errors.find((e) => e?.code === INTERRUPTION_CODE);
    if (r.finishReasons.length === 1 && r.errors.length === 0) {
      if (r.finishReasons[0] === 'stop' && r.content === expected) counts.complete++;
      else if (r.finishReasons[0] === 'abort')
        counts.errorEvent++; // the engine's own abort, forwarded
      else counts.bad++, bad.push(`${id} ${fault}: finish ${r.finishReasons[0]}, content ${r.content === expected ? 'same' : 'DIFFERS'}`);
    } else if (r.errors.length === 1 && r.finishReasons.length === 0) {
      if (interruption) counts.interrupted++;
      else counts.errorEvent++;
    } else {
      counts.bad++;
      bad.push(`${id} ${fault}: ${r.finishReasons.length} finish_reasons, ${r.errors.length} error events`);
    }
  };

  const worker = async () => {
    while (Date.now() < end) await one().catch((e) => (counts.bad++, bad.push(`client error ${(e as Error).message}`)));
  };
  for (let round = 1; round <= ROUNDS; round++) {
    end = Date.now() + MINUTES * 60_000;
    await Promise.all(Array.from({ length: STREAMS }, worker));
    if (OWN_PROCESS) {
      await sleep(IDLE_SECONDS * 1000);
      await checkpoint(`after-round-${round}`, round === ROUNDS);
    }
  }
  clearInterval(sampler);
  const envoyAlive = stack.envoyExit === undefined;
  await stack.stop();
  const who = OWN_PROCESS ? 'sidecar (its own process)' : 'test process (sidecar + fake engines)';
  process.stdout.write(
    `soak: ${ROUNDS} x ${MINUTES} min, ${STREAMS} concurrent streams, seed ${SEED}, MAX_CONTINUATIONS=${MAX_CONTINUATIONS}, ${TOKENS}-token answers at 20 ms/token\n` +
      `  streams ${counts.streams}: complete and byte-identical ${counts.complete}, interruption event ${counts.interrupted}, ` +
      `engine error/abort forwarded ${counts.errorEvent}, HTTP error with JSON body ${counts.httpError}, anything else ${counts.bad}\n` +
      `  ${who} RSS ${mb(rssMin)}-${mb(rssMax)} MB; Envoy RSS max ${mb(envoyRssMax)} MB; Envoy alive: ${envoyAlive}\n` +
      (checkpoints.length > 0 ? `  after ${IDLE_SECONDS} s idle each:\n${checkpoints.join('\n')}\n` : ''),
  );
  for (const b of bad.slice(0, 30)) process.stdout.write(`  BAD ${b}\n`);
  process.exit(counts.bad === 0 && envoyAlive ? 0 : 1);
}

void main();
