// Live memory per idle stream, after garbage collection: `node --expose-gc dist/test/bench/idle-memory.js N`.
//
// RSS growth (what run.ts reports while relaying) counts garbage that V8 has not collected yet and heap it
// keeps for later, so it says little about what one stream costs. Here everything runs in this one process
// (fake engine, sidecar, client; Envoy is the real binary beside it), the heap is collected before and after
// opening N streams that then wait for their next token, and the same is done without the sidecar (through
// Envoy's egress listener, plain proxying). The difference is the sidecar's own heap per idle stream.
// Prints one JSON line.
import { Pool } from 'undici';
import { startTestStack } from '../support/stack';

const gc = (globalThis as { gc?: () => void }).gc;

async function collected(): Promise<NodeJS.MemoryUsage> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await new Promise((r) => setTimeout(r, 50));
  }
  return process.memoryUsage();
}

/** Heap + external bytes per stream while n streams sent to `url` wait for their second token. */
async function perIdleStream(url: string, n: number): Promise<number> {
  const pool = new Pool(url, { connections: n + 10 });
  const body = JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: 'idle' }] });
  const headers = { 'content-type': 'application/json' };
  const warm = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { ...headers, 'x-fake-answer-tokens': '2,2' },
    body,
  });
  await warm.body.text();
  const before = await collected();
  const responses = await Promise.all(
    Array.from({ length: n }, () =>
      pool.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { ...headers, 'x-fake-answer-tokens': '2,0', 'x-fake-token-ms': '3000' },
        body,
      }),
    ),
  );
  // First token at 3 s (every stream past its commit point), the second at 6 s: measure in between.
  await new Promise((r) => setTimeout(r, 3500));
  const during = await collected();
  for (const r of responses) r.body.destroy();
  await pool.destroy();
  return (during.heapUsed + during.external - before.heapUsed - before.external) / n;
}

async function main(): Promise<void> {
  if (!gc) throw new Error('run with node --expose-gc');
  const n = Number(process.argv[2] ?? 500);
  const stack = await startTestStack({ replicas: 1, env: { LOG_LEVEL: 'warn', STALL_IDLE_TIMEOUT_SECONDS: '30' } });
  try {
    const egress = stack.sidecar!.ctx.config.downstreamUrl;
    const withoutSidecar = await perIdleStream(egress, n);
    const withSidecar = await perIdleStream(stack.url, n);
    const kib = (b: number) => Math.round((b / 1024) * 10) / 10;
    process.stdout.write(
      `${JSON.stringify({ streams: n, kibPerStreamWithoutSidecar: kib(withoutSidecar), kibPerStreamWithSidecar: kib(withSidecar), sidecarKibPerIdleStream: kib(withSidecar - withoutSidecar) })}\n`,
    );
  } finally {
    await stack.stop();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  },
);
