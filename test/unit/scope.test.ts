import { decideScope, type ScopeDecision } from '../../src/request/scope';

const cfg = {
  continuationModel: 'test-model' as string | undefined,
  engine: 'sglang' as 'sglang' | 'vllm',
  maxContinuationBodyBytes: 10 * 1024 * 1024,
};
const body = (extra: Record<string, unknown> = {}) => ({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }], ...extra });
const buf = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));
const reason = (d: ScopeDecision) => (d.inScope ? 'in-scope' : d.reason);

describe('decideScope: in scope', () => {
  it('accepts a streaming chat request and returns the parsed payload untouched', () => {
    const b = body({ unknown_field: { nested: [1, 2] }, temperature: 0.2 });
    const raw = buf(b);
    const d = decideScope(raw, cfg);
    expect(d).toEqual({ inScope: true, payload: b, multimodal: false, bodyBytes: raw.length, structured: false });
  });
  it('keeps unknown keys on messages too (validation never strips)', () => {
    const b = body({ messages: [{ role: 'user', content: 'hi', name: 'bob', custom: 1 }] });
    const d = decideScope(buf(b), cfg);
    expect(d.inScope && d.payload.messages[0]).toEqual({ role: 'user', content: 'hi', name: 'bob', custom: 1 });
  });
  it('flags multimodal requests on SGLang and keeps them in scope', () => {
    const d = decideScope(
      buf(
        body({
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'x' },
                { type: 'image_url', image_url: { url: 'u' } },
              ],
            },
          ],
        }),
      ),
      cfg,
    );
    expect(d).toMatchObject({ inScope: true, multimodal: true });
  });
  it('accepts text-only content parts on vLLM', () => {
    const d = decideScope(buf(body({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] })), { ...cfg, engine: 'vllm' });
    expect(d).toMatchObject({ inScope: true, multimodal: false });
  });
  it('a body exactly at the limit is still in scope', () => {
    const raw = buf(body());
    expect(reason(decideScope(raw, { ...cfg, maxContinuationBodyBytes: raw.length }))).toBe('in-scope');
  });
});

describe('decideScope: skip reasons', () => {
  it('not-json never carries the body text into its detail (it is logged)', () => {
    const d = decideScope(buf('{"messages": [{"role":"user","content":"my secret prompt"'), cfg);
    expect(JSON.stringify(d)).not.toContain('secret');
  });

  it('not-json: invalid JSON, invalid UTF-8, BOM, NaN', () => {
    expect(reason(decideScope(buf('{"stream": tru'), cfg))).toBe('not-json');
    expect(reason(decideScope(Buffer.from([0x7b, 0xff, 0x7d]), cfg))).toBe('not-json');
    expect(reason(decideScope(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), buf(body())]), cfg))).toBe('not-json');
    expect(reason(decideScope(buf('{"x": NaN}'), cfg))).toBe('not-json');
    expect(reason(decideScope(Buffer.alloc(0), cfg))).toBe('not-json');
  });
  it('not-chat-request: not an object, no messages, empty messages, message without role', () => {
    for (const v of [
      [1],
      'str',
      null,
      42,
      { stream: true },
      body({ messages: [] }),
      body({ messages: [{ content: 'x' }] }),
      body({ messages: 'hi' }),
      body({ messages: [null] }),
    ]) {
      expect(reason(decideScope(buf(JSON.stringify(v)), cfg))).toBe('not-chat-request');
    }
  });
  it('not-streaming: absent, false, or not the boolean true', () => {
    expect(reason(decideScope(buf(body({ stream: false })), cfg))).toBe('not-streaming');
    expect(reason(decideScope(buf({ messages: [{ role: 'user', content: 'x' }] }), cfg))).toBe('not-streaming');
    expect(reason(decideScope(buf(body({ stream: 'true' })), cfg))).toBe('not-streaming');
  });
  it('client-continue-final-message', () => {
    expect(reason(decideScope(buf(body({ continue_final_message: true })), cfg))).toBe('client-continue-final-message');
    expect(reason(decideScope(buf(body({ continue_final_message: false })), cfg))).toBe('in-scope');
  });
  it('continuation-model-unset: nothing is in scope', () => {
    expect(reason(decideScope(buf(body()), { ...cfg, continuationModel: undefined }))).toBe('continuation-model-unset');
    expect(reason(decideScope(buf(body()), { ...cfg, continuationModel: '  ' }))).toBe('continuation-model-unset');
  });
  it('structured-output: json_object / json_schema / structural_tag and engine constraint fields', () => {
    for (const rf of [{ type: 'json_object' }, { type: 'json_schema', json_schema: { name: 'x' } }, { type: 'structural_tag' }]) {
      const d = decideScope(buf(body({ response_format: rf })), cfg);
      expect(d).toEqual({ inScope: false, reason: 'structured-output', detail: `response_format.type=${rf.type}` });
    }
    expect(reason(decideScope(buf(body({ response_format: { type: 'text' } })), cfg))).toBe('in-scope');
    expect(reason(decideScope(buf(body({ response_format: null })), cfg))).toBe('in-scope');
    for (const f of ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'structured_outputs', 'regex', 'ebnf']) {
      expect(decideScope(buf(body({ [f]: 'x' })), cfg)).toEqual({ inScope: false, reason: 'structured-output', detail: f });
    }
  });
  it('body-too-large', () => {
    const raw = buf(body());
    expect(decideScope(raw, { ...cfg, maxContinuationBodyBytes: raw.length - 1 })).toEqual({
      inScope: false,
      reason: 'body-too-large',
      detail: `${raw.length} bytes`,
    });
  });
  it('vllm-multimodal', () => {
    const b = body({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'u' } }] }] });
    expect(reason(decideScope(buf(b), { ...cfg, engine: 'vllm' }))).toBe('vllm-multimodal');
  });
  it('checks in the reference order', () => {
    const raw = buf(body({ stream: false, continue_final_message: true, response_format: { type: 'json_object' } }));
    expect(reason(decideScope(raw, { ...cfg, continuationModel: undefined, maxContinuationBodyBytes: 1 }))).toBe('not-streaming');
    const raw2 = buf(body({ continue_final_message: true, response_format: { type: 'json_object' } }));
    expect(reason(decideScope(raw2, { ...cfg, continuationModel: undefined, maxContinuationBodyBytes: 1 }))).toBe(
      'client-continue-final-message',
    );
    const raw3 = buf(body({ response_format: { type: 'json_object' } }));
    expect(reason(decideScope(raw3, { ...cfg, continuationModel: undefined, maxContinuationBodyBytes: 1 }))).toBe(
      'continuation-model-unset',
    );
    expect(reason(decideScope(raw3, { ...cfg, maxContinuationBodyBytes: 1 }))).toBe('structured-output');
    const raw4 = buf(body({ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }));
    expect(reason(decideScope(raw4, { ...cfg, engine: 'vllm', maxContinuationBodyBytes: 1 }))).toBe('body-too-large');
  });
});
