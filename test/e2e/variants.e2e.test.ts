// Deployment variants through the real Envoy: prefix families, engines, the continuation router split,
// configuration that turns the gateway off, and the gateway's own failure modes.
import { resetFaults } from '../../tools/fake-engine/faults';
import { waitForExtProcHealth } from '../../tools/stack/envoy-process';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '30,40' };
/** A multimodal request: text plus an image part. */
const IMAGE_BODY = {
  model: 'm',
  stream: true,
  stream_options: { include_usage: true },
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Describe this.' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
      ],
    },
  ],
};

describe('vLLM dialect, mixed with an SGLang continuation router', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { CONTINUATION_ENGINE: 'vllm' }, engine: { dialect: 'vllm' }, continuationReplica: true });
    // The continuation router is an SGLang one: leg2's reasoning field must be renamed for the client.
    await stack.continuationEngine!.close();
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('CONTINUATION_URL split: leg2 goes to the continuation router; the vLLM reasoning field and leg1 id are kept', async () => {
    // Restart the continuation replica as SGLang on the same port, so the field-name rewrite is exercised.
    const { startFakeEngine } = await import('../../tools/fake-engine/server');
    const port = stack.continuationEngine!.port;
    const sglang = await startFakeEngine({ port, name: 'continuation-sglang', dialect: 'sglang' });
    stack.continuationEngine = sglang;
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody({ stream_options: { include_usage: true } }), {
      ...SIZE,
      'x-request-id': id,
      'x-fake-fault': 'crash@20',
    });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(r.content).toBe(ref.content);
    // The client sees vLLM's `reasoning` all along, never SGLang's `reasoning_content`.
    expect(r.raw).not.toContain('reasoning_content');
    expect(r.ids).toEqual([`chatcmpl-${id}`]);
    const leg2 = sglang.requests.find((q) => q.headers['x-request-id'] === `${id}-c1`);
    expect(leg2?.continuation).toBe(true);
    expect(leg2?.body.add_generation_prompt).toBe(false);
    // Reasoning counted with the recovered part (in the shape the continuation engine reported).
    expect(r.usage.completion_tokens_details?.reasoning_tokens ?? r.usage.reasoning_tokens).toBeGreaterThan(0);
    expect(r.usage.continuation).toMatchObject({ legs: 2, method: 'estimate' });
  });
});

describe('SGLang leg1, vLLM continuation router', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ continuationReplica: true, env: {} });
    const { startFakeEngine } = await import('../../tools/fake-engine/server');
    const port = stack.continuationEngine!.port;
    await stack.continuationEngine!.close();
    stack.continuationEngine = await startFakeEngine({ port, name: 'continuation-vllm', dialect: 'vllm' });
  });
  afterAll(async () => stack?.stop());

  test('reasoning field renamed the other way: the client keeps seeing reasoning_content', async () => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@10' });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    for (const c of r.chunks) expect(c.choices?.[0]?.delta?.reasoning).toBeUndefined();
  });
});

describe('multimodal usage and exact accounting', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: {} });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('multimodal request: prompt_tokens = leg2 prompt minus the recovered tokens', async () => {
    const id = newRequestId();
    const body = IMAGE_BODY;
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40' });
    expectOneCompleteStream(r);
    const end = await stack.waitForEnd(id);
    const leg2 = seenFor(stack, id)[1];
    expect(leg2.continuation).toBe(true);
    // The fake engine reports leg2's prompt as original prompt + prefix tokens; the correction removes the
    // recovered part (estimated), so prompt_tokens lands near the original prompt, not the estimate's 12.
    const direct = await uninterrupted(stack, body, SIZE);
    expect(Math.abs(r.usage.prompt_tokens - direct.usage.prompt_tokens)).toBeLessThanOrEqual(Math.ceil(end.recovered_tokens * 0.5) + 5);
    expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens + r.usage.completion_tokens);
  });
});

describe('TOKENIZE_URL: exact accounting', () => {
  beforeEach(() => resetFaults());

  test('usage counts the recovered part exactly: completion and prompt tokens equal the uninterrupted run', async () => {
    const stack = await startTestStack({ env: { TOKENIZE_URL: '{engine0}/tokenize' } });
    try {
      const id = newRequestId();
      const body = chatBody({ stream_options: { include_usage: true } });
      const ref = await uninterrupted(stack, body, SIZE);
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40' });
      expectOneCompleteStream(r);
      // SGLang's /tokenize takes text only: the prompt is leg 2's minus the counted prefix.
      expect(r.usage.continuation).toMatchObject({ legs: 2, method: 'tokenize', dialect: 'sglang', prompt: 'leg2-minus-prefix' });
      expect(r.usage.completion_tokens).toBe(ref.usage.completion_tokens);
      expect(r.usage.reasoning_tokens).toBe(ref.usage.reasoning_tokens);
      expect(r.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
      const end = await stack.waitForEnd(id);
      expect(end).toMatchObject({
        accounting: 'tokenize',
        accounting_dialect: 'sglang',
        accounting_prompt: 'leg2-minus-prefix',
        accounting_fallback: null,
      });
    } finally {
      await stack.stop();
    }
  });

  test("llama.cpp's /tokenize (TOKENIZE_DIALECT=llamacpp) and the multimodal subtraction: exact prompt for an image request", async () => {
    const stack = await startTestStack({
      engine: { tokenizer: 'llamacpp' },
      env: { TOKENIZE_URL: '{engine0}/tokenize', TOKENIZE_DIALECT: 'llamacpp', TOKENIZE_TIMEOUT_MS: '2000' },
    });
    try {
      const id = newRequestId();
      const body = IMAGE_BODY;
      const ref = await uninterrupted(stack, body, SIZE);
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40' });
      expectOneCompleteStream(r);
      expect(r.usage.continuation).toMatchObject({ method: 'tokenize', dialect: 'llamacpp', prompt: 'leg2-minus-prefix' });
      expect(r.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
      expect(r.usage.completion_tokens).toBe(ref.usage.completion_tokens);
      const end = await stack.waitForEnd(id);
      expect(end).toMatchObject({ accounting: 'tokenize', accounting_dialect: 'llamacpp', accounting_prompt: 'leg2-minus-prefix' });
    } finally {
      await stack.stop();
    }
  });

  test('an unreachable tokenizer falls back to the estimate, logged, without holding up the recovery', async () => {
    const stack = await startTestStack({ env: { TOKENIZE_URL: 'http://127.0.0.1:9/tokenize' } });
    try {
      const id = newRequestId();
      const r = await postChat(stack.url, chatBody({ stream_options: { include_usage: true } }), {
        ...SIZE,
        'x-request-id': id,
        'x-fake-fault': 'crash@40',
      });
      expectOneCompleteStream(r);
      expect(r.usage.continuation).toMatchObject({ method: 'estimate', dialect: null, prompt: 'estimate' });
      // A stable code, never the exception's text (which names the address: connect ECONNREFUSED 127.0.0.1:9).
      expect(r.usage.continuation.fallback).toBe('tokenize-unreachable');
      expect(r.raw).not.toContain('127.0.0.1');
      expect(stack.records({ request_id: id, decision: 'TOKENIZE_FALLBACK' })).toHaveLength(1);
      const end = await stack.waitForEnd(id);
      expect(end).toMatchObject({
        accounting: 'estimate',
        accounting_dialect: null,
        accounting_prompt: 'estimate',
        accounting_fallback: r.usage.continuation.fallback,
      });
    } finally {
      await stack.stop();
    }
  });
});

describe('gateway off or broken: never worse than no gateway', () => {
  test('CONTINUATION_MODEL unset: every request is proxied natively, byte for byte', async () => {
    const stack = await startTestStack({ env: { CONTINUATION_MODEL: '' } });
    try {
      const id = newRequestId();
      const raw = JSON.stringify(chatBody());
      const r = await postChat(stack.url, raw, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@30' });
      // The crash reaches the client exactly as without the gateway: a cut stream, no leg2.
      expect(r.transportError).not.toBeNull();
      const seen = seenFor(stack, id);
      expect(seen).toHaveLength(1);
      expect(JSON.stringify(seen[0].body)).toBe(raw);
      expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })[0]).toMatchObject({ reason: 'continuation-model-unset' });
    } finally {
      await stack.stop();
    }
  });

  test('oversized body: proxied natively, no continuation', async () => {
    const stack = await startTestStack({ env: { MAX_CONTINUATION_BODY_MB: '0.001' } });
    try {
      const id = newRequestId();
      const raw = JSON.stringify(chatBody({}, 'x'.repeat(4000)));
      const r = await postChat(stack.url, raw, { ...SIZE, 'x-request-id': id });
      expect(r.status).toBe(200);
      expect(r.finishReasons).toEqual(['stop']);
      expect(JSON.stringify(seenFor(stack, id)[0].body)).toBe(raw);
      expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })[0]).toMatchObject({ reason: 'body-too-large' });
    } finally {
      await stack.stop();
    }
  });

  test('a 2 MB request body (Envoy bug #46237 territory) is buffered and continued correctly', async () => {
    const stack = await startTestStack({ env: { MAX_CONTINUATION_BODY_MB: '10' } });
    try {
      const id = newRequestId();
      const body = chatBody({}, 'y'.repeat(2 * 1024 * 1024));
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40' });
      expectOneCompleteStream(r);
      const seen = seenFor(stack, id);
      expect(seen).toHaveLength(2);
      expect(seen[0].body.messages[0].content.length).toBe(2 * 1024 * 1024);
    } finally {
      await stack.stop();
    }
  });

  test('router tier unreachable: 429 like the reference gateway', async () => {
    const stack = await startTestStack({ env: {} });
    try {
      await Promise.all(stack.engines.map((e) => e.close()));
      const r = await postChat(stack.url, chatBody(), { 'x-request-id': newRequestId() });
      expect(r.status).toBe(429);
      expect(JSON.parse(r.raw).error.code).toBe('router_unreachable');
    } finally {
      await stack.stop();
    }
  });

  test('sidecar down: Envoy proxies natively (health-checked fail-open)', async () => {
    const stack = await startTestStack({ env: {} });
    try {
      await stack.stopSidecar();
      await waitForExtProcHealth(stack.envoy.adminUrl, false, 10_000);
      const id = newRequestId();
      const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id });
      expect(r.status).toBe(200);
      expect(r.finishReasons).toEqual(['stop']);
      expect(seenFor(stack, id)).toHaveLength(1);
    } finally {
      await stack.stop();
    }
  });
});
