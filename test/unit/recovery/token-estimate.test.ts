import {
  estimateRecoveredTokens,
  estimateTokens,
  hasMultimodalContent,
  messageText,
  promptText,
} from '../../../src/recovery/token-estimate';

const est = (t: string) => estimateTokens(t, 1.6, 4.0);

describe('estimateTokens', () => {
  it('is 0 for empty text', () => {
    expect(est('')).toBe(0);
  });
  it('counts other characters at 4 per token, rounded up', () => {
    expect(est('hi')).toBe(1);
    expect(est('let me think. ')).toBe(4); // 14 / 4 = 3.5
    expect(est('The answer is par')).toBe(5); // 17 / 4 = 4.25
    expect(est('abcd')).toBe(1);
  });
  it('counts CJK (Han, kana, Hangul) at 1.6 per token', () => {
    expect(est('你好世界')).toBe(3); // 4 / 1.6 = 2.5
    expect(est('こんにちは')).toBe(4); // 5 / 1.6 = 3.125
    expect(est('안녕')).toBe(2); // 2 / 1.6 = 1.25
  });
  it('adds the two parts before rounding for mixed text', () => {
    expect(est('你好 world')).toBe(3); // 2/1.6 + 6/4 = 2.75
    expect(est('答案是 42.')).toBe(3); // 3/1.6 + 4/4 = 2.875
  });
  it('counts code points, not UTF-16 units (as Python len)', () => {
    expect(est('😀😀😀😀😀')).toBe(2); // 5 code points / 4 = 1.25 (10 UTF-16 units would give 3)
  });
  it('uses the given rates', () => {
    expect(estimateTokens('你好 world', 1, 1)).toBe(8);
  });
});

describe('messageText / promptText', () => {
  it('takes string content', () => {
    expect(messageText({ role: 'user', content: 'hi' })).toBe('hi');
  });
  it('takes only text parts of multimodal content', () => {
    expect(
      messageText({
        role: 'user',
        content: [
          { type: 'text', text: 'what is in ' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          { type: 'text', text: 'this image?' },
          { type: 'input_audio', input_audio: { data: 'xx' } },
        ],
      }),
    ).toBe('what is in this image?');
  });
  it('adds tool call names and arguments', () => {
    expect(
      messageText({
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      }),
    ).toBe('get_weather{"city":"Paris"}');
  });
  it('joins all messages and the tools schema in Python json.dumps spelling', () => {
    const payload = {
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'U' },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
    };
    expect(promptText(payload)).toBe(
      'SU[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]',
    );
  });
  it('ignores an empty tools list and non-message junk', () => {
    expect(promptText({ messages: [{ role: 'user', content: 'a' }, null, 3], tools: [] })).toBe('a');
    expect(promptText({})).toBe('');
  });
});

describe('hasMultimodalContent', () => {
  it('is false for string content and text-only parts (type missing counts as text)', () => {
    expect(hasMultimodalContent({ messages: [{ role: 'user', content: 'hi' }] })).toBe(false);
    expect(hasMultimodalContent({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { text: 'b' }] }] })).toBe(false);
  });
  it('is true for any non-text part', () => {
    expect(hasMultimodalContent({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] })).toBe(true);
    expect(hasMultimodalContent({ messages: [{ role: 'user', content: [{ type: 'video_url' }] }] })).toBe(true);
  });
});

describe('estimateRecoveredTokens', () => {
  it('estimates the original prompt and the delivered text (reference content_done_stall)', () => {
    const r = estimateRecoveredTokens({ messages: [{ role: 'user', content: 'hi' }] }, 'let me think. ', 'The answer is par', {
      cjk: 1.6,
      other: 4,
    });
    expect(r).toEqual({ promptTokens: 1, reasoningTokens: 4, contentTokens: 5, totalRecovered: 9 });
  });
  it('handles CJK reasoning', () => {
    const r = estimateRecoveredTokens({ messages: [{ role: 'user', content: '你好' }] }, '我想一想', '', { cjk: 1.6, other: 4 });
    expect(r).toEqual({ promptTokens: 2, reasoningTokens: 3, contentTokens: 0, totalRecovered: 3 });
  });
});
