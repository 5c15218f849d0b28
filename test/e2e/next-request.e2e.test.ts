// The interruption event carries the next request (issue 35, item 3): a stream that ends with the interruption
// event names, in `next_request`, the request that continues it (the one the gateway itself would have sent), and a
// client that posts it, as it is, gets the rest of the answer. Through the real Envoy and the sidecar with
// CONTINUATION_ENABLED=false (every failure after the first token ends with the event), fake SGLang replicas.
import { answerFor } from '../../tools/fake-engine/answer';
import { resetFaults } from '../../tools/fake-engine/faults';
import { completionAnswer } from '../../tools/fake-engine/text-completion';
import { type ClientResult, chatBody, completionsBody, newRequestId, postChat, postCompletions } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor } from './helpers';

jest.setTimeout(90_000);

let stack: TestStack;
let small: TestStack;
const env = { CONTINUATION_MODEL: 'generic-test', CONTINUATION_ENABLED: 'false' };

beforeAll(async () => {
  resetFaults();
  [stack, small] = await Promise.all([
    startTestStack({ replicas: 2, env }),
    startTestStack({ env: { ...env, INTERRUPTION_NEXT_REQUEST_MAX_BYTES: '200' } }),
  ]);
});
afterAll(async () => {
  await Promise.all([stack?.stop(), small?.stop()]);
});

/** Posts the carried request as a client would: its path, its body, nothing else. */
function post(s: TestStack, next: { method: string; path: string; body: unknown }, headers: Record<string, string>): Promise<ClientResult> {
  expect(next.method).toBe('POST');
  return next.path === '/v1/completions' ? postCompletions(s.url, next.body, headers) : postChat(s.url, next.body, headers);
}

test('chat: the event carries the original messages plus the partial answer; posted, it gets the rest', async () => {
  const size = { 'x-fake-answer-tokens': '6,20' };
  const body = chatBody({ temperature: 0.5, stream_options: { include_usage: true } }, 'What comes next?');
  const id = newRequestId('next-chat');
  const cut = await postChat(stack.url, body, { ...size, 'x-request-id': id, 'x-fake-fault': 'crash@12' });
  const e = expectInterruption(cut, 'continuation-disabled');
  const next = e.next_request;
  expect(next).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
  // The client's own request, its messages, its stream_options; the delivered text as the final assistant message.
  const { messages, ...rest } = next.body;
  const { messages: _sent, ...sentRest } = body;
  expect(rest).toMatchObject({ ...sentRest, continue_final_message: true, add_generation_prompt: false });
  expect(next.body.stream_options).toEqual(body.stream_options);
  expect(messages.slice(0, -1)).toEqual(body.messages);
  expect(messages.at(-1).role).toBe('assistant');
  expect(JSON.stringify(messages.at(-1))).toContain(cut.content);
  // Nothing the client did not send or receive: no header, address or id of ours in it.
  expect(JSON.stringify(next)).not.toMatch(/127\.0\.0\.1|x-request-id|fake-engine|replica/);

  const id2 = newRequestId('next-chat-posted');
  const rest2 = await post(stack, next, { ...size, 'x-request-id': id2 });
  expectOneCompleteStream(rest2);
  const a = answerFor(body.messages, { reasoning: 6, content: 20 });
  expect(cut.reasoning + rest2.reasoning).toBe(a.reasoningTokens.join(''));
  expect(cut.content + rest2.content).toBe(a.contentTokens.join(''));
  // The engine continued the partial message (it was not asked for a new answer).
  expect(seenFor(stack, id2).map((s) => s.continuation)).toEqual([true]);
});

test('completions: the prompt with the delivered text appended and the budget left; posted, it gets the rest', async () => {
  const prompt = 'The next request carries';
  const size = { 'x-fake-answer-tokens': '0,20' };
  const body = completionsBody({ max_tokens: 50 }, prompt);
  const cut = await postCompletions(stack.url, body, { ...size, 'x-fake-fault': 'crash@8' });
  const e = expectInterruption(cut, 'continuation-disabled');
  expect(e.next_request).toEqual({
    method: 'POST',
    path: '/v1/completions',
    body: { ...body, prompt: prompt + cut.content, max_tokens: 50 - e.delivered_output_tokens },
  });
  const rest = await post(stack, e.next_request, size);
  expect([rest.errors, rest.finishReasons, rest.done]).toEqual([[], ['stop'], true]);
  expect(cut.content + rest.content).toBe(completionAnswer(prompt, { reasoning: 0, content: 20 }).join(''));
});

test('bounded by INTERRUPTION_NEXT_REQUEST_MAX_BYTES: a larger one is left out, the event is the same otherwise', async () => {
  const body = chatBody({}, 'A long conversation '.repeat(20));
  const headers = { 'x-fake-answer-tokens': '6,20', 'x-fake-fault': 'crash@10;-' };
  const e = expectInterruption(await postChat(small.url, body, headers), 'continuation-disabled');
  expect(e.next_request).toBeUndefined();
  // The same cut with the default bound (1 MiB) carries it.
  resetFaults();
  const withDefault = expectInterruption(await postChat(stack.url, body, headers), 'continuation-disabled');
  expect(Buffer.byteLength(JSON.stringify(withDefault.next_request))).toBeGreaterThan(200);
});

test('a tool call delivered: no next request (a call cannot be continued part-way)', async () => {
  const body = chatBody({ tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }] }, 'Use the tool');
  const cut = await postChat(stack.url, body, { 'x-fake-answer-tokens': '2,0', 'x-fake-fault': 'crash@4;-' });
  const e = expectInterruption(cut);
  expect(cut.toolCalls.length).toBeGreaterThan(0);
  expect(e.next_request).toBeUndefined();
});
