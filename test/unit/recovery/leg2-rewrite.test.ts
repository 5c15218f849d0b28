import { isRoleOnlyChunk, rewriteLeg2Chunk } from '../../../src/recovery/leg2-rewrite';
import type { RecoveredTokens } from '../../../src/recovery/token-estimate';

const recovered: RecoveredTokens = { promptTokens: 1, reasoningTokens: 4, contentTokens: 5, totalRecovered: 9 };
const base = { responseId: 'chatcmpl-leg1', reasoningField: null, recovered, multimodal: false } as const;
const deepCopy = (v: unknown) => JSON.parse(JSON.stringify(v));

describe('rewriteLeg2Chunk', () => {
  it('replaces leg2 id with leg1 id', () => {
    const chunk = { id: 'chatcmpl-leg2-should-be-rewritten', choices: [{ index: 0, delta: { content: 'tial recovery.' } }] };
    const out: any = rewriteLeg2Chunk(chunk, base);
    expect(out.id).toBe('chatcmpl-leg1');
    expect(out.choices).toEqual(chunk.choices);
  });
  it('keeps the id when leg1 had none, and adds none to a chunk without id', () => {
    expect(rewriteLeg2Chunk({ id: 'x', choices: [] }, { ...base, responseId: null }).id).toBe('x');
    expect('id' in rewriteLeg2Chunk({ choices: [] }, base)).toBe(false);
  });

  it('renames reasoning_content to reasoning when leg1 used reasoning (SGLang leg2 after vLLM leg1)', () => {
    const out: any = rewriteLeg2Chunk(
      { choices: [{ index: 0, delta: { reasoning_content: ' step three.' } }] },
      { ...base, reasoningField: 'reasoning' },
    );
    expect(out.choices[0].delta).toEqual({ reasoning: ' step three.' });
  });
  it('renames reasoning to reasoning_content when leg1 used reasoning_content (vLLM leg2 after SGLang leg1)', () => {
    const out: any = rewriteLeg2Chunk(
      { choices: [{ index: 0, delta: { reasoning: ' step three.' } }] },
      { ...base, reasoningField: 'reasoning_content' },
    );
    expect(out.choices[0].delta).toEqual({ reasoning_content: ' step three.' });
  });
  it('renames a null reasoning field next to content without losing the content', () => {
    const out: any = rewriteLeg2Chunk(
      { choices: [{ delta: { content: 'done.', reasoning_content: null } }] },
      { ...base, reasoningField: 'reasoning' },
    );
    expect(out.choices[0].delta).toEqual({ content: 'done.', reasoning: null });
  });
  it('does not overwrite a non-empty target field', () => {
    const out: any = rewriteLeg2Chunk(
      { choices: [{ delta: { reasoning: 'keep', reasoning_content: 'other' } }] },
      { ...base, reasoningField: 'reasoning' },
    );
    expect(out.choices[0].delta).toEqual({ reasoning: 'keep' });
  });
  it('keeps names as they are when leg1 showed no reasoning field', () => {
    const chunk = { choices: [{ delta: { reasoning_content: 'r' } }] };
    expect((rewriteLeg2Chunk(chunk, base) as any).choices[0].delta).toEqual({ reasoning_content: 'r' });
  });

  it('corrects usage when present', () => {
    const chunk = {
      id: 'leg2',
      choices: [],
      usage: {
        prompt_tokens: 999,
        completion_tokens: 3,
        total_tokens: 1002,
        reasoning_tokens: 0,
        prompt_tokens_details: { cached_tokens: 5000 },
      },
    };
    expect(rewriteLeg2Chunk(chunk, base).usage).toEqual({
      prompt_tokens: 1,
      completion_tokens: 12,
      total_tokens: 13,
      reasoning_tokens: 4,
      prompt_tokens_details: { cached_tokens: 0 },
    });
  });
  it('uses the multimodal formula when told so', () => {
    const chunk = { choices: [], usage: { prompt_tokens: 61234, completion_tokens: 4, total_tokens: 61238 } };
    expect(
      (rewriteLeg2Chunk as (...a: unknown[]) => any)(chunk, {
        ...base,
        multimodal: true,
        recovered: { ...recovered, reasoningTokens: 0, contentTokens: 7, totalRecovered: 7 },
      }).usage.prompt_tokens,
    ).toBe(61227);
  });
  it('leaves null usage alone', () => {
    expect(rewriteLeg2Chunk({ choices: [{ delta: { content: 'a' } }], usage: null }, base).usage).toBeNull();
  });

  it('never mutates its input', () => {
    const chunk = {
      id: 'leg2',
      choices: [{ index: 0, delta: { reasoning_content: 'x' } }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, prompt_tokens_details: { cached_tokens: 1 } },
    };
    const before = deepCopy(chunk);
    const out: any = rewriteLeg2Chunk(chunk, { ...base, reasoningField: 'reasoning' });
    expect(chunk).toEqual(before);
    expect(out).not.toBe(chunk);
    expect(out.choices[0].delta).not.toBe(chunk.choices[0].delta);
  });
  it('passes non-objects through', () => {
    expect(rewriteLeg2Chunk(null as any, base)).toBeNull();
  });
});

describe('isRoleOnlyChunk', () => {
  it('detects the role announcement of SGLang and vLLM', () => {
    expect(isRoleOnlyChunk({ id: 'a', choices: [{ index: 0, delta: { role: 'assistant' } }] })).toBe(true);
    expect(
      isRoleOnlyChunk({ id: 'a', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] }),
    ).toBe(true);
    expect(
      isRoleOnlyChunk({
        choices: [{ index: 0, delta: { role: 'assistant', content: null, reasoning_content: null, tool_calls: null } }],
        usage: null,
      }),
    ).toBe(true);
    // vLLM's, with continuous usage stats: the prompt and nothing generated yet.
    expect(
      isRoleOnlyChunk({
        choices: [{ index: 0, delta: { role: 'assistant', content: '' } }],
        usage: { prompt_tokens: 17, completion_tokens: 0, total_tokens: 17, completion_tokens_details: { reasoning_tokens: 0 } },
      }),
    ).toBe(true);
  });
  it('is false when the chunk carries anything', () => {
    expect(isRoleOnlyChunk({ choices: [{ delta: { role: 'assistant', content: 'hi' } }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [{ delta: { role: 'assistant', reasoning_content: 'r' } }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [{ delta: { role: 'assistant', reasoning: 'r' } }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [{ delta: { role: 'assistant', tool_calls: [{ index: 0 }] } }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [{ delta: { role: 'assistant' }, finish_reason: 'stop' }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [{ delta: { role: 'assistant' } }], usage: { completion_tokens: 1 } })).toBe(false);
  });
  it('is false without a role, without choices, or for non-objects', () => {
    expect(isRoleOnlyChunk({ choices: [{ delta: {} }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [{ delta: { content: '' } }] })).toBe(false);
    expect(isRoleOnlyChunk({ choices: [] })).toBe(false);
    expect(isRoleOnlyChunk({})).toBe(false);
    expect(isRoleOnlyChunk('data')).toBe(false);
  });
});
