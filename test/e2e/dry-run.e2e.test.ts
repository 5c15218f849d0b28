// Issue 18 item 4 through the real Envoy: the dry run (CONTINUATION_ENABLED=false) never changes a stream.
// A leg 1 pause longer than the stall timer is detected and logged (TRIGGERED, SKIPPED) and leg 1 is relayed
// for as long as it lives: the client's bytes are the engine's own, as without the gateway. And two of item 9's
// drifts seen on the same kind of stream: one warn-level WAITING per silence, and a tool-call-delivered
// interruption event that counts the delivered tool call.

import { estimateTokens } from '../../src/recovery/token-estimate';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor } from './helpers';

jest.setTimeout(60_000);

const SIZE = { 'x-fake-answer-tokens': '20,30' };

describe('the dry run (CONTINUATION_ENABLED=false, STALL_IDLE_TIMEOUT_SECONDS=1)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // vLLM's completion id is chatcmpl-<x-request-id>: the same request id gives the same bytes, whoever answers.
    stack = await startTestStack({ env: { CONTINUATION_ENABLED: 'false' }, engine: { dialect: 'vllm' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a pause longer than the stall timer, then a normal finish: byte-identical to the engine answered directly', async () => {
    const id = newRequestId('dry');
    const body = chatBody({ stream_options: { include_usage: true } });
    // Silent 3.5 s after token 12 (three and a half stall periods), then the rest of the answer.
    const headers = { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'stall@12:3500' };
    const viaGateway = await postChat(stack.url, body, headers);
    const end = await stack.waitForEnd(id);
    resetFaults();
    const direct = await postChat(stack.engines[0].url, body, headers);

    expectOneCompleteStream(viaGateway);
    expect(direct.status).toBe(200);
    expect(direct.finishReasons).toEqual(['stop']);
    expect(viaGateway.raw).toBe(direct.raw);
    expect(viaGateway.usage).toEqual(direct.usage);

    // Detected and logged, nothing else: one leg, never aborted, the stream completed.
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(2); // the gateway's leg 1, then the direct request
    expect(seen[0].clientAborted).toBe(false);
    expect(seen[0].tokensSent).toBe(seen[1].tokensSent);
    expect(end).toMatchObject({ outcome: 'completed', legs: 1, attempt: 1 });
    expect(stack.records({ request_id: id, decision: 'TRIGGERED' })).toEqual([
      expect.objectContaining({ failure: 'stall', dry_run: true, first_delta_sent: true }),
    ]);
    expect(stack.records({ request_id: id, decision: 'SKIPPED' })).toEqual([
      expect.objectContaining({ reason: 'continuation-disabled', dry_run: true }),
    ]);
    expect(stack.records({ request_id: id, decision: 'FAILED' })).toEqual([]);

    // Item 9: the silence spans several timer periods, and only its first WAITING is a warning.
    const waiting = stack.records({ request_id: id, decision: 'WAITING' });
    expect(waiting.length).toBeGreaterThanOrEqual(2);
    expect(waiting.map((w) => w.level)).toEqual(['warn', ...waiting.slice(1).map(() => 'debug')]);
  });

  test('a pause of 1.6 stall periods: one TRIGGERED, one warn-level WAITING, the same bytes', async () => {
    const id = newRequestId('dry2');
    const headers = { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'stall@5:1600' };
    const first = await postChat(stack.url, chatBody(), headers);
    expectOneCompleteStream(first);
    resetFaults();
    const direct = await postChat(stack.engines[0].url, chatBody(), headers);
    expect(first.raw).toBe(direct.raw);
    expect(stack.records({ request_id: id, decision: 'TRIGGERED' })).toHaveLength(1);
    expect(stack.records({ request_id: id, decision: 'WAITING', level: 'warn' })).toHaveLength(1);
  });

  test('leg 1 dying after the pause still ends with the interruption event (continuation-disabled), never silently', async () => {
    const id = newRequestId('dry3');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'stall@8:1500' });
    expectOneCompleteStream(r); // control: the same pause alone completes
    resetFaults();
    const id2 = newRequestId('dry3b');
    const cut = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id2, 'x-fake-fault': 'crash@8' });
    expectInterruption(cut, 'continuation-disabled');
    expect(seenFor(stack, id2)).toHaveLength(1);
  });
});

describe('item 9: the tool-call-delivered interruption event counts the delivered tool call', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack();
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('no reasoning, a tool call cut after its second chunk: delivered_output_tokens is its estimate, not 0', async () => {
    const id = newRequestId('tool');
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }];
    const r = await postChat(stack.url, chatBody({ tools }), {
      'x-fake-answer-tokens': '0,10',
      'x-request-id': id,
      'x-fake-fault': 'crash@3',
    });
    const e = expectInterruption(r, 'tool-call-delivered');
    expect(r.reasoning + r.content).toBe('');
    const delivered = r.toolCalls.map((t) => `${t.function?.name ?? ''}${t.function?.arguments ?? ''}`).join('');
    expect(delivered.length).toBeGreaterThan(0);
    expect(e.delivered_output_tokens).toBe(estimateTokens(delivered, 1.6, 4));
    expect(e.delivered_output_tokens).toBeGreaterThan(0);
    expect((await stack.waitForEnd(id)).delivered_output_tokens).toBe(e.delivered_output_tokens);
  });
});
