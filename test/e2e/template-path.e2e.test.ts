// Continuations verified against the template the engine serves, through the real Envoy: the checkpoints whose
// published template differs from llama.cpp's copy (the R1 distills, Qwen3 Thinking-2507), an engine without a
// reasoning parser, a model no table entry knows (CHAT_TEMPLATE's template path), a served template that is not
// the engine's (refused by our own render where it cannot continue; where it can, vLLM's own chat /tokenize
// disagrees and ends it), CHAT_TEMPLATE=auto on vLLM (no template read: the engine's check is the only one, and a
// check that times out ends the stream). The replicas are fake engines serving the same template
// (tools/fake-engine/template-model.ts: OUR READING of an engine, its renderer held equal to the engines' code by
// test/unit/templates/engine-prompt.test.ts); each answers a continuation only when its prompt is exactly the
// uninterrupted prompt plus a prefix of its answer, so a drifting leg 2 cannot pass.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { resetFaults } from '../../tools/fake-engine/faults';
import { CHECKPOINTS } from '../fidelity/checkpoints';
import { provisionAssets } from '../fidelity/harness-client';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

jest.setTimeout(120_000);

const SIZE = { 'x-fake-answer-tokens': '20,24' };
const R1_SPECIAL = { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' };
const templates = provisionAssets().templates;
const read = (file: string) => fs.readFileSync(path.join(templates, file), 'utf8');
const published = (checkpoint: string) => {
  const c = CHECKPOINTS.find((x) => x.checkpoint === checkpoint);
  if (!c?.base || !c.derive) throw new Error(`no derived form for ${checkpoint}`);
  return c.derive(read(c.base));
};

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'served-template-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A model directory's tokenizer_config.json holding `text` and the special tokens: what CHAT_TEMPLATE points at. */
function modelDir(name: string, text: string, special: Record<string, string> = {}): string {
  const d = path.join(dir, name);
  fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify({ ...special, chat_template: text }));
  return d;
}

async function stackFor(o: {
  model: string;
  engine: 'sglang' | 'vllm';
  served: string;
  special?: Record<string, string>;
  parser?: 'markers' | 'none';
  chatTemplate?: string;
  tokenizeUrl?: boolean;
}): Promise<TestStack> {
  const env: Record<string, string> = { CONTINUATION_MODEL: o.model, CONTINUATION_ENGINE: o.engine };
  if (o.chatTemplate) env.CHAT_TEMPLATE = o.chatTemplate;
  return startTestStack({
    env,
    engine: { dialect: o.engine, chatTemplate: { text: o.served, special: o.special, parser: o.parser ?? 'markers' } },
  });
}

/** A crash at `fault`, then the answer compared with the uninterrupted one: identical, or an explicit end. */
async function crashAt(stack: TestStack, fault: string, body = chatBody()) {
  const id = newRequestId();
  const ref = await uninterrupted(stack, body, SIZE);
  const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
  return { id, ref, r };
}

function expectIdentical(x: Awaited<ReturnType<typeof crashAt>>): void {
  expectOneCompleteStream(x.r);
  expect(x.r.reasoning).toBe(x.ref.reasoning);
  expect(x.r.content).toBe(x.ref.content);
}

/** Leg 2's chat /tokenize bodies the engines saw: the engine's own check (src/templates/engine-check.ts). */
const engineChecks = (stack: TestStack) =>
  stack.engines.flatMap((e) => e.requests).filter((q) => q.path === '/tokenize' && q.body?.continue_final_message === true);

const attempt = (stack: TestStack, id: string) =>
  stack.records({ decision: 'ATTEMPT' }).find((l) => String(l.request_id) === id && l.leg === 2);

describe.each(['sglang', 'vllm'] as const)('the R1 distills with their published template, on %s', (engine) => {
  let stack: TestStack;
  const text = read('deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
  beforeAll(async () => {
    stack = await stackFor({
      model: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B',
      engine,
      served: text,
      special: R1_SPECIAL,
      chatTemplate: modelDir(`r1-${engine}`, text, R1_SPECIAL),
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a cut inside the reasoning: the same answer, leg 2 checked against the served template', async () => {
    const x = await crashAt(stack, 'crash@8');
    expectIdentical(x);
    expect(x.r.reasoning.length).toBeGreaterThan(0);
    expect(attempt(stack, x.id)).toMatchObject({ family: 'deepseek-r1-distill', source: 'table', verified_by: 'template' });
  });

  test('a cut inside the content', async () => {
    const x = await crashAt(stack, 'crash@34');
    if (engine === 'sglang') {
      expectIdentical(x);
      expect(seenFor(stack, x.id)[1].body.messages.at(-1).content).toContain('</think>');
    } else {
      // vLLM renders the final turn through the template, which keeps only the text after `</think>`.
      expectInterruption(x.r, 'continuation-unsupported');
      expect(seenFor(stack, x.id)).toHaveLength(1);
    }
  });
});

describe.each(['sglang', 'vllm'] as const)('Qwen3 Thinking-2507 (the prompt opens <think>), on %s', (engine) => {
  let stack: TestStack;
  const text = published('Qwen/Qwen3-235B-A22B-Thinking-2507');
  beforeAll(async () => {
    stack = await stackFor({
      model: 'Qwen/Qwen3-235B-A22B-Thinking-2507',
      engine,
      served: text,
      chatTemplate: modelDir(`t2507-${engine}`, text),
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a cut inside the content: the same answer, no doubled <think>', async () => {
    const x = await crashAt(stack, 'crash@34');
    expectIdentical(x);
    const final = seenFor(stack, x.id)[1].body.messages.at(-1);
    expect(JSON.stringify(final)).not.toContain('<think>');
  });

  test('a cut inside the reasoning', async () => {
    const x = await crashAt(stack, 'crash@8');
    if (engine === 'sglang') expectIdentical(x);
    // The template closes the final turn's think block: vLLM cannot be asked to continue inside it.
    else expectInterruption(x.r, 'continuation-unsupported');
  });
});

describe.each(['sglang', 'vllm'] as const)('no reasoning parser (the markers arrive in the content), Qwen3 on %s', (engine) => {
  let stack: TestStack;
  const text = read('Qwen-Qwen3-0.6B.jinja');
  beforeAll(async () => {
    stack = await stackFor({
      model: 'Qwen/Qwen3-32B',
      engine,
      served: text,
      parser: 'none',
      chatTemplate: modelDir(`raw-${engine}`, text),
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    ['inside the reasoning', 'crash@8'],
    ['inside the content', 'crash@34'],
  ])('a cut %s: leg 2 continues the raw text as it arrived, no markers added', async (where, fault) => {
    const x = await crashAt(stack, fault);
    if (engine === 'vllm' && where === 'inside the reasoning') {
      // vLLM renders the final turn through the template, which gives an open `<think>` no rendering: refused.
      expectInterruption(x.r, 'continuation-unverified');
      return;
    }
    expectIdentical(x);
    expect(x.r.reasoning).toBe('');
    expect(x.r.content.startsWith('<think>')).toBe(true);
    expect(attempt(stack, x.id)).toMatchObject({ raw_as_arrived: true, verified_by: 'template' });
    const sent = seenFor(stack, x.id)[1].body.messages.at(-1).content;
    expect(sent.match(/<think>/g)).toHaveLength(1);
  });
});

describe('a model no table entry knows, with CHAT_TEMPLATE: the template path', () => {
  let stack: TestStack;
  const text = published('Qwen/QwQ-32B');
  beforeAll(async () => {
    stack = await stackFor({ model: 'acme/house-reasoner-v2', engine: 'vllm', served: text, chatTemplate: modelDir('house', text) });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each(['crash@8', 'crash@34'])('%s: the same answer, designed and verified from the served template', async (fault) => {
    const x = await crashAt(stack, fault);
    expectIdentical(x);
    expect(attempt(stack, x.id)).toMatchObject({ family: 'template', source: 'template', verified_by: 'template' });
  });
});

describe('a served template our render cannot continue: it ends the stream before the engine is asked', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // The engine serves the published R1 form; CHAT_TEMPLATE names llama.cpp's altered Qwen-32B copy, whose final
    // turn does not render the open block leg 2 continues: our own render refuses it.
    const served = read('deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
    const wrong = read('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja');
    stack = await stackFor({
      model: 'acme/r1-distill-finetune',
      engine: 'vllm',
      served,
      special: R1_SPECIAL,
      chatTemplate: modelDir('wrong', wrong, R1_SPECIAL),
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('continuation-unverified, leg 2 never sent, the engine never asked', async () => {
    const x = await crashAt(stack, 'crash@8');
    expectInterruption(x.r, 'continuation-unverified');
    expect(seenFor(stack, x.id).filter((s) => s.path.endsWith('/chat/completions'))).toHaveLength(1);
    const skipped = stack.records({ decision: 'SKIPPED' }).find((l) => String(l.request_id) === x.id);
    expect(skipped).toMatchObject({ reason: 'continuation-unverified', source: 'template', detail: 'leg2-not-rendered' });
    expect(engineChecks(stack)).toHaveLength(0);
  });
});

describe("a served template our render accepts but the engine does not serve: the engine's own check ends the stream", () => {
  let stack: TestStack;
  const served = published('Qwen/QwQ-32B');
  // CHAT_TEMPLATE is a copy with a default system prompt where the conversation has none (a hand-edited
  // ConfigMap): leg 2 renders through it exactly as the uninterrupted prompt did, so only the engine can tell.
  const edited = served.replace(
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n  {%- endif %}",
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n  {%- else %}\n" +
      "        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}\n  {%- endif %}",
  );
  beforeAll(async () => {
    expect(edited).not.toBe(served);
    stack = await stackFor({ model: 'acme/house-reasoner-v2', engine: 'vllm', served, chatTemplate: modelDir('edited', edited) });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each(['crash@8', 'crash@34'])(
    '%s: continuation-unverified, leg 2 never sent; the log says the engine disagreed and at which token, no text',
    async (fault) => {
      const x = await crashAt(stack, fault);
      const e = expectInterruption(x.r, 'continuation-unverified');
      expect(e.delivered_output_tokens).toBeGreaterThan(0);
      expect(seenFor(stack, x.id).filter((s) => s.path.endsWith('/chat/completions'))).toHaveLength(1);
      const skipped = stack.records({ decision: 'SKIPPED' }).find((l) => String(l.request_id) === x.id);
      // <|im_start|> is token 0 of both prompts; then the engine's `user` where ours has `system`.
      expect(skipped).toMatchObject({
        reason: 'continuation-unverified',
        source: 'template',
        detail: 'engine-prompt-differs',
        differs_at_token: 1,
      });
      expect(JSON.stringify(skipped)).not.toMatch(/<think>|helpful assistant|Tell me/);
      // The engine was asked: leg 2's chat /tokenize (through the egress listener), rendered by its own template.
      expect(engineChecks(stack).length).toBeGreaterThan(0);
    },
  );
});

describe.each([
  ['Qwen/Qwen3-32B', "Qwen3's table entry", 'qwen3', 'table'],
  ['acme/house-reasoner-v2', 'the generic guess', 'generic', 'generic'],
])('CHAT_TEMPLATE=auto on vLLM, %s (%s): no template is read, the engine’s own check the only one', (model, _, family, source) => {
  let stack: TestStack;
  // The engine serves Qwen3's template; the sidecar reads none (vLLM serves none to read).
  const text = read('Qwen-Qwen3-0.6B.jinja');
  const setTokenizeDelay = (ms: number) => {
    for (const e of stack.engines) e.tokenizeDelayMs = ms;
  };
  beforeAll(async () => {
    stack = await stackFor({ model, engine: 'vllm', served: text, chatTemplate: 'auto' });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => {
    resetFaults();
    setTokenizeDelay(0);
  });

  test('a cut inside the content, the engine agreeing: the same answer, verified by the engine; /props never asked', async () => {
    const x = await crashAt(stack, 'crash@34');
    expectIdentical(x);
    expect(attempt(stack, x.id)).toMatchObject({ family, source, verified_by: 'engine' });
    expect(engineChecks(stack).length).toBeGreaterThan(0);
    expect(stack.engines.flatMap((e) => e.requests).filter((q) => q.path === '/props')).toHaveLength(0);
  });

  test('a cut inside the reasoning: ended explicitly before leg 2 (the table refuses it; the guess, the engine refuses)', async () => {
    const x = await crashAt(stack, 'crash@8');
    expect(seenFor(stack, x.id).filter((s) => s.path.endsWith('/chat/completions'))).toHaveLength(1);
    const skipped = stack.records({ decision: 'SKIPPED' }).find((l) => String(l.request_id) === x.id);
    if (source === 'table') {
      expectInterruption(x.r, 'continuation-unsupported');
    } else {
      // vLLM renders the final turn through Qwen3's template, which closes the think block: not the raw text.
      expectInterruption(x.r, 'continuation-unverified');
      expect(skipped).toMatchObject({ detail: 'engine-prompt-differs', differs_at_token: expect.any(Number) });
    }
  });

  test('the engine’s check times out (TOKENIZE_TIMEOUT_MS): continuation-unverified, leg 2 never sent', async () => {
    setTokenizeDelay(1500); // TOKENIZE_TIMEOUT_MS: 200 ms
    const x = await crashAt(stack, 'crash@34');
    expectInterruption(x.r, 'continuation-unverified');
    expect(seenFor(stack, x.id).filter((s) => s.path.endsWith('/chat/completions'))).toHaveLength(1);
    const skipped = stack.records({ decision: 'SKIPPED' }).find((l) => String(l.request_id) === x.id);
    expect(skipped).toMatchObject({ reason: 'continuation-unverified', detail: 'engine-check-unavailable:timeout' });
    expect(stack.records({ decision: 'ENGINE_CHECK_UNAVAILABLE' }).some((l) => String(l.request_id) === x.id)).toBe(true);
  });
});

describe('a burst on the template path: 100 streams of one replica crash together', () => {
  let stack: TestStack;
  const text = published('Qwen/QwQ-32B');
  beforeAll(async () => {
    stack = await startTestStack({
      env: { CONTINUATION_MODEL: 'acme/house-reasoner-v2', CONTINUATION_ENGINE: 'sglang', CHAT_TEMPLATE: modelDir('burst', text) },
      // Each client request runs its fault script afresh: leg 1 crashes, its continuation does not.
      engine: { dialect: 'sglang', chatTemplate: { text, parser: 'markers' }, faultScope: 'request' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('every stream completes as the uninterrupted answer, each leg 2 rendered and verified', async () => {
    const n = 100;
    const bodies = Array.from({ length: n }, (_, k) => chatBody({}, `Question number ${k}?`));
    const refs: Awaited<ReturnType<typeof uninterrupted>>[] = [];
    for (const b of bodies) refs.push(await uninterrupted(stack, b, SIZE));
    const ids = bodies.map(() => newRequestId('burst'));
    const runs = await Promise.all(
      bodies.map((b, k) => postChat(stack.url, b, { ...SIZE, 'x-request-id': ids[k], 'x-fake-fault': `crash@${4 + (k % 36)}` })),
    );
    const differing = runs.filter(
      (r, k) => r.status !== 200 || r.errors.length > 0 || r.reasoning !== refs[k].reasoning || r.content !== refs[k].content,
    );
    expect(differing.map((r) => r.errors[0]?.reason ?? r.status)).toEqual([]);
    const verified = stack.records({ decision: 'ATTEMPT' }).filter((l) => ids.includes(String(l.request_id)) && l.leg === 2);
    expect(verified).toHaveLength(n);
    for (const v of verified) expect(v).toMatchObject({ source: 'template', verified_by: 'template' });
  });
});
