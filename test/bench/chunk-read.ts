// Reading a chunk (issue 29, item 3): the fields the gateway reads of every relayed chat.completion.chunk
// (choice 0's delta, finish_reason, usage), through the hand-written guards of src/openai/chunk.ts against a
// zod 4 schema of the same fields, on the same parsed chunks, in the same run (ratios, not absolute times).
// Both read the same answers (checked first). Run: npm run build && node dist/test/bench/chunk-read.js
import { z } from 'zod';
import { readChoiceZero, usageCounts } from '../../src/openai/chunk';

const count = z.number().finite().nonnegative();
const Chunk = z.object({
  choices: z
    .array(
      z.object({
        index: z.number().optional(),
        delta: z
          .object({
            content: z.string().nullish(),
            reasoning_content: z.string().nullish(),
            reasoning: z.string().nullish(),
            tool_calls: z.array(z.unknown()).nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .optional(),
  usage: z
    .object({
      prompt_tokens: count.optional(),
      completion_tokens: count.optional(),
      total_tokens: count.optional(),
      reasoning_tokens: count.optional(),
      completion_tokens_details: z.object({ reasoning_tokens: count.optional() }).nullish(),
    })
    .nullish(),
});

/** What both readers produce for one chunk. */
function viaGuards(j: Record<string, unknown>) {
  const c = readChoiceZero(j);
  const u = usageCounts(j.usage);
  return [c.content, c.reasoning, c.finishReason, c.toolCalls !== null, u?.prompt, u?.completion, u?.reasoning];
}

function viaZod(j: unknown) {
  const r = Chunk.safeParse(j);
  if (!r.success) return null;
  const choice = r.data.choices?.find((x) => (x.index ?? 0) === 0);
  const d = choice?.delta;
  const u = r.data.usage;
  const reasoning = typeof d?.reasoning_content === 'string' ? d.reasoning_content : (d?.reasoning ?? '');
  const tools = Array.isArray(d?.tool_calls) && d.tool_calls.length > 0;
  return [
    d?.content ?? '',
    reasoning,
    choice?.finish_reason ?? null,
    tools,
    u?.prompt_tokens,
    u?.completion_tokens,
    u?.completion_tokens_details?.reasoning_tokens ?? u?.reasoning_tokens,
  ];
}

function chunks(n: number): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (let i = 0; i < n; i++) {
    const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'Qwen/Qwen3-32B' };
    const kind = i % 10;
    const delta =
      kind < 4
        ? { content: ` word${i}` }
        : kind < 8
          ? { reasoning_content: ` step${i}` }
          : kind === 8
            ? { tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] }
            : {};
    const usage =
      i % 5 === 0
        ? { prompt_tokens: 17, completion_tokens: i, total_tokens: 17 + i, completion_tokens_details: { reasoning_tokens: i >> 1 } }
        : undefined;
    // Engines stream JSON text; each chunk is parsed once by the relay (not part of either measurement).
    out.push(
      JSON.parse(
        JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: kind === 9 ? 'stop' : null }], ...(usage ? { usage } : {}) }),
      ),
    );
  }
  return out;
}

function time(label: string, data: Array<Record<string, unknown>>, read: (j: Record<string, unknown>) => unknown): number {
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (const j of data) sink += read(j) === null ? 0 : 1;
  const ns = Number(process.hrtime.bigint() - t0) / data.length;
  if (sink !== data.length) throw new Error(`${label}: a chunk did not read`);
  return ns;
}

const data = chunks(200_000);
for (const j of data.slice(0, 2000)) {
  const a = JSON.stringify(viaGuards(j));
  const b = JSON.stringify(viaZod(j));
  if (a !== b) throw new Error(`the readers disagree: ${a} vs ${b}`);
}
const rows: Array<[number, number]> = [];
for (let round = 0; round < 7; round++) rows.push([time('guards', data, viaGuards), time('zod', data, viaZod)]);
const warm = rows.slice(2);
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const g = med(warm.map((r) => r[0]));
const zz = med(warm.map((r) => r[1]));
console.log(
  `chunk-read: ${data.length} chunks x ${warm.length} rounds (after 2 warm-up rounds), median per chunk: guards ${g.toFixed(0)} ns, zod ${zz.toFixed(0)} ns, zod/guards ${(zz / g).toFixed(1)}x`,
);
