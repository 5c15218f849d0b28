// TOKENIZER through the real Envoy (issue 27): the sidecar counts a continuation with the model's tokenizer.json
// in process. The fake engines count with their own toy tokenizer, so usage cannot equal an uninterrupted run's
// here (test/real-engine/tokenizer.test.ts shows that on a real engine); what is asserted is what the client
// and leg 2 get from the in-process count: the method, the recovered tokens and leg 2's budget.

import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { loadModelTokenizer } from '../../src/templates/model-tokenizer';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor } from './helpers';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const assets = execFileSync('bash', [path.join(ROOT, 'scripts', 'tokenizer-assets.sh')], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
})
  .trim()
  .split('\n')
  .pop() as string;
const QWEN3 = path.join(assets, 'qwen3');
const SIZE = { 'x-fake-answer-tokens': '20,30' };

describe('TOKENIZER: a continuation counted in process', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { TOKENIZER: QWEN3 } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test("usage.continuation says `tokenizer`; recovered tokens and leg 2's max_tokens are the tokenizer's count", async () => {
    const id = newRequestId('tokenizer');
    const body = chatBody({ stream_options: { include_usage: true }, max_tokens: 200 });
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@30' });
    expectOneCompleteStream(r);
    const legs = seenFor(stack, id);
    expect(legs.map((l) => l.continuation)).toEqual([false, true]);
    // What leg 1 delivered, as leg 2 continues from it (the generic family's `<think>reasoning</think>content`,
    // whose markers are a guess and not counted), counted by Qwen3's tokenizer.
    const prefix: string = legs[1].body.messages.at(-1).content;
    const parts = /^<think>([\s\S]*)<\/think>([\s\S]*)$/.exec(prefix);
    expect(parts).not.toBeNull();
    const tok = loadModelTokenizer(QWEN3);
    const expected = (await tok.count(parts?.[1] ?? '')) + (await tok.count(parts?.[2] ?? ''));
    expect(r.usage.continuation).toEqual({
      legs: 2,
      recovered_tokens: expected,
      method: 'tokenizer',
      path: 'template',
      dialect: null,
      prompt: 'leg2-minus-prefix',
    });
    expect(legs[1].body.max_tokens).toBe(200 - expected);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({
      accounting: 'tokenizer',
      accounting_prompt: 'leg2-minus-prefix',
      accounting_fallback: null,
      recovered_tokens: expected,
    });
  });
});
