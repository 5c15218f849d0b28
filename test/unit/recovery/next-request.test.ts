import { nextRequest, type Received } from '../../../src/recovery/next-request';

const settings = { maxBytes: 1 << 20, rates: { cjk: 1.6, other: 4 }, target: { continuationModel: 'generic', engine: 'vllm' as const } };
const received = (content: string, extra: Partial<Received> = {}): Received => ({
  reasoning: '',
  content,
  reasoningField: null,
  toolCallsSeen: false,
  prefixCapped: false,
  ...extra,
});
const chat = { endpoint: 'chat' as const, payload: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] } };
const completions = { endpoint: 'completions' as const, payload: { model: 'm', stream: true, prompt: 'Once', max_tokens: 40 } };

describe('nextRequest', () => {
  it('chat: the original messages plus the partial answer, continued; the client stream_options (none) kept', () => {
    const n = nextRequest(chat, received('Hello there'), settings);
    expect(n?.path).toBe('/v1/chat/completions');
    expect(n?.body).toMatchObject({ model: 'm', stream: true, continue_final_message: true, add_generation_prompt: false });
    // The generic family's form (the reference's `<think>` builder) is what the gateway itself would send.
    expect(n?.body.messages).toEqual([...chat.payload.messages, { role: 'assistant', content: '<think></think>Hello there' }]);
    expect('stream_options' in (n?.body ?? {})).toBe(false);
  });
  it('completions: the prompt plus the delivered text, the budget left by the estimate', () => {
    const n = nextRequest(completions, received(' upon a time'), settings);
    expect(n).toEqual({
      method: 'POST',
      path: '/v1/completions',
      body: { ...completions.payload, prompt: 'Once upon a time', max_tokens: 37 },
    });
  });
  it('none: a tool call, the prefix past its cap, nothing delivered, a spent budget, a bound of 0 or one too small', () => {
    expect(nextRequest(chat, received('x', { toolCallsSeen: true }), settings)).toBeUndefined();
    expect(nextRequest(chat, received('x', { prefixCapped: true }), settings)).toBeUndefined();
    expect(nextRequest(chat, received(''), settings)).toBeUndefined();
    expect(
      nextRequest({ ...completions, payload: { ...completions.payload, max_tokens: 1 } }, received(' upon a time'), settings),
    ).toBeUndefined();
    expect(nextRequest(chat, received('x'), { ...settings, maxBytes: 0 })).toBeUndefined();
    expect(nextRequest(chat, received('x'), { ...settings, maxBytes: 50 })).toBeUndefined();
  });
});
