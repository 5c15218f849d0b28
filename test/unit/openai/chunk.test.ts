// The typed view of a streamed chunk (src/openai/chunk.ts): each field the gateway reads is checked for its
// type, and anything else reads as absent, never as a wrong value.
import { choiceZero, readChoiceZero, toolCallText, usageCounts } from '../../../src/openai/chunk';

describe('readChoiceZero', () => {
  it('reads choice 0 (an absent index counts as 0), whatever its position', () => {
    const chunk = {
      choices: [
        { index: 1, delta: { content: 'other' } },
        { delta: { content: 'mine' }, finish_reason: null },
      ],
    };
    expect(readChoiceZero(chunk)).toEqual({
      reasoning: '',
      reasoningField: null,
      content: 'mine',
      toolCalls: null,
      finishReason: null,
      malformedFinish: null,
    });
  });

  it('names the reasoning field the engine used (SGLang reasoning_content, vLLM reasoning)', () => {
    expect(readChoiceZero({ choices: [{ delta: { reasoning_content: 'r' } }] })).toMatchObject({
      reasoning: 'r',
      reasoningField: 'reasoning_content',
    });
    expect(readChoiceZero({ choices: [{ delta: { reasoning: 'r' } }] })).toMatchObject({ reasoning: 'r', reasoningField: 'reasoning' });
  });

  it('fields of the wrong type read as absent; a finish_reason of the wrong type is malformed (issue 39)', () => {
    const chunk = { choices: [{ index: 0, delta: { content: 7, reasoning_content: null, tool_calls: 'x' }, finish_reason: 3 }] };
    expect(readChoiceZero(chunk)).toEqual({
      reasoning: '',
      reasoningField: null,
      content: '',
      toolCalls: null,
      finishReason: null,
      malformedFinish: 'number',
    });
    for (const [f, what] of [
      [{ type: 'stop' }, 'object'],
      ['', 'empty-string'],
      ['STOP', 'unknown-string'],
      [['stop'], 'array'],
      [false, 'boolean'],
    ] as const)
      expect(readChoiceZero({ choices: [{ delta: {}, finish_reason: f }] })).toMatchObject({ finishReason: null, malformedFinish: what });
    for (const f of ['stop', 'length', 'tool_calls', 'abort', 'content_filter', 'repetition', 'error'])
      expect(readChoiceZero({ choices: [{ finish_reason: f }] })).toMatchObject({ finishReason: f, malformedFinish: null });
    for (const choices of [undefined, null, 'x', {}, [null], [7], [{ index: '0', delta: { content: 'a' } }]])
      expect(readChoiceZero({ choices }).content).toBe('');
  });

  it('a finish without a delta, an empty tool_calls list', () => {
    expect(readChoiceZero({ choices: [{ finish_reason: 'stop' }] }).finishReason).toBe('stop');
    expect(readChoiceZero({ choices: [{ delta: { tool_calls: [] } }] }).toolCalls).toBeNull();
    expect(choiceZero([{ index: 2 }])).toBeUndefined();
  });
});

describe('toolCallText', () => {
  it('the name and argument fragments, skipping what is not a function call', () => {
    expect(toolCallText([{ function: { name: 'get', arguments: '{"a"' } }, null, { function: 'x' }, { function: { arguments: 5 } }])).toBe(
      'get{"a"',
    );
  });
});

describe('usageCounts', () => {
  it("reads OpenAI's, vLLM's and SGLang's layouts", () => {
    expect(
      usageCounts({ prompt_tokens: 17, completion_tokens: 9, total_tokens: 26, completion_tokens_details: { reasoning_tokens: 4 } }),
    ).toEqual({
      prompt: 17,
      completion: 9,
      total: 26,
      reasoning: 4,
      cached: undefined,
    });
    expect(usageCounts({ prompt_tokens: 17, reasoning_tokens: 3, prompt_tokens_details: { cached_tokens: 8 } })).toMatchObject({
      reasoning: 3,
      cached: 8,
    });
  });

  it('a count that is no count (negative, not finite, not a number) is absent; no object, no counts', () => {
    expect(usageCounts({ prompt_tokens: -1, completion_tokens: Number.NaN, total_tokens: '26', reasoning_tokens: Infinity })).toEqual({
      prompt: undefined,
      completion: undefined,
      total: undefined,
      reasoning: undefined,
      cached: undefined,
    });
    for (const u of [null, undefined, 5, 'usage', [1]]) expect(usageCounts(u)).toBeNull();
  });
});
