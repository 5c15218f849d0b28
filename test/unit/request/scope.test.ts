import { endpointOf } from '../../../src/request/endpoint';
import { DEFAULT_MAX_JSON_DEPTH, decideScope, type ScopeDecision, scopeByMethod } from '../../../src/request/scope';

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
    expect(d).toEqual({ inScope: true, endpoint: 'chat', payload: b, multimodal: false, bodyBytes: raw.length, structured: false });
  });
  it('keeps unknown keys on messages too (validation never strips)', () => {
    const b = body({ messages: [{ role: 'user', content: 'hi', name: 'bob', custom: 1 }] });
    const d = decideScope(buf(b), cfg);
    expect(d.inScope && d.endpoint === 'chat' && d.payload.messages[0]).toEqual({ role: 'user', content: 'hi', name: 'bob', custom: 1 });
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
    expect(reason(decideScope(raw, { ...cfg, continuationModel: undefined }))).toBe('not-streaming');
    const raw2 = buf(body({ continue_final_message: true, response_format: { type: 'json_object' } }));
    expect(reason(decideScope(raw2, { ...cfg, continuationModel: undefined }))).toBe('client-continue-final-message');
    const raw3 = buf(body({ response_format: { type: 'json_object' } }));
    expect(reason(decideScope(raw3, { ...cfg, continuationModel: undefined }))).toBe('continuation-model-unset');
    expect(reason(decideScope(raw3, cfg))).toBe('structured-output');
    const raw4 = buf(body({ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }));
    expect(reason(decideScope(raw4, { ...cfg, engine: 'vllm', maxContinuationBodyBytes: raw4.length - 1 }))).toBe('body-too-large');
    expect(reason(decideScope(raw4, { ...cfg, engine: 'vllm' }))).toBe('vllm-multimodal');
  });
  it('the size first, then the depth, both before the body is parsed', () => {
    // Not even JSON: a body too large or too deep is never handed to JSON.parse (the reference checks the
    // size last; only the logged reason differs).
    expect(reason(decideScope(buf(`${'['.repeat(200)} not json`), cfg))).toBe('json-too-deep');
    expect(reason(decideScope(buf(`${'['.repeat(200)} not json`), { ...cfg, maxContinuationBodyBytes: 10 }))).toBe('body-too-large');
    const raw = buf(body({ stream: false }));
    expect(reason(decideScope(raw, { ...cfg, maxContinuationBodyBytes: raw.length - 1 }))).toBe('body-too-large');
  });
});

describe('decideScope: deep JSON (issue 19) never reaches a parser', () => {
  const nest = (n: number): unknown => {
    let v: unknown = 'leaf';
    for (let i = 0; i < n; i++) v = i % 2 ? { k: v } : [v];
    return v;
  };
  // The body object is level 1, a field's value level 2: a field nested n deep makes the body n + 1 deep.
  it('at MAX_BODY_JSON_DEPTH in scope, one level past it out of scope (json-too-deep), in any field', () => {
    for (const field of ['tools', 'x_extra', 'chat_template_kwargs']) {
      expect(reason(decideScope(buf(body({ [field]: nest(DEFAULT_MAX_JSON_DEPTH - 1) })), cfg))).toBe('in-scope');
      expect(decideScope(buf(body({ [field]: nest(DEFAULT_MAX_JSON_DEPTH) })), cfg)).toEqual({
        inScope: false,
        reason: 'json-too-deep',
        detail: `deeper than ${DEFAULT_MAX_JSON_DEPTH}`,
      });
    }
    // 10,000 levels, which JSON.stringify cannot even build (RangeError): written as text.
    const tenThousand = JSON.stringify(body({ tools: 'X' })).replace('"X"', `${'['.repeat(10_000)}${']'.repeat(10_000)}`);
    expect(reason(decideScope(buf(tenThousand), cfg))).toBe('json-too-deep');
  });
  it('the limit is configurable (MAX_BODY_JSON_DEPTH)', () => {
    expect(reason(decideScope(buf(body({ x: nest(5) })), { ...cfg, maxJsonDepth: 6 }))).toBe('in-scope');
    expect(reason(decideScope(buf(body({ x: nest(6) })), { ...cfg, maxJsonDepth: 6 }))).toBe('json-too-deep');
  });
});

describe('scope and the log: a skip detail never carries request text (issue 19)', () => {
  it('multiple-choices: n only as a small integer, else its JSON type', () => {
    expect(decideScope(buf(body({ n: 3 })), cfg)).toEqual({ inScope: false, reason: 'multiple-choices', detail: 'n=3' });
    expect(decideScope(buf(body({ n: `A${'x'.repeat(1_000_000)}` })), cfg)).toEqual({
      inScope: false,
      reason: 'multiple-choices',
      detail: 'n=<string>',
    });
    expect(decideScope(buf(body({ n: ['secret text'] })), cfg)).toEqual({
      inScope: false,
      reason: 'multiple-choices',
      detail: 'n=<array>',
    });
    expect(decideScope(buf(body({ n: 1e20 })), cfg)).toEqual({ inScope: false, reason: 'multiple-choices', detail: 'n=<number>' });
  });
  it('not-chat-request: the schema issue code and path, never its message', () => {
    const cases: Array<[unknown, string]> = [
      [{ messages: 'secret text' }, 'invalid_type at messages'],
      [{ messages: [{ role: '' }] }, 'too_small at messages.0.role'],
      [{ messages: [{ role: 7 }, { role: ['secret text'] }] }, 'invalid_type at messages.0.role'],
      [JSON.stringify('secret text'), 'invalid_type'],
    ];
    for (const [v, detail] of cases) expect(decideScope(buf(v), cfg)).toEqual({ inScope: false, reason: 'not-chat-request', detail });
  });
});

describe('scopeByMethod (issue 19): only POST is in scope', () => {
  it('POST: decided from the body; every other method: proxied natively, named only when standard', () => {
    expect(scopeByMethod('POST')).toBeNull();
    for (const m of ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE'])
      expect(scopeByMethod(m)).toEqual({ inScope: false, reason: 'method-not-post', detail: m });
    expect(scopeByMethod('post')).toEqual({ inScope: false, reason: 'method-not-post', detail: '<other>' });
    expect(scopeByMethod('SECRETTEXT')).toEqual({ inScope: false, reason: 'method-not-post', detail: '<other>' });
    expect(scopeByMethod(undefined)).toEqual({ inScope: false, reason: 'method-not-post', detail: '<other>' });
  });
});

describe('endpoints: the path picks the schema', () => {
  const completions = (extra: Record<string, unknown> = {}) => ({
    model: 'm',
    stream: true,
    prompt: 'Once upon a time',
    max_tokens: 20,
    ...extra,
  });
  const onCompletions = { ...cfg, endpoint: 'completions' as const };

  it('endpointOf: the exact paths, query string ignored, nothing else', () => {
    expect(endpointOf('/v1/chat/completions')).toBe('chat');
    expect(endpointOf('/v1/completions?x=1')).toBe('completions');
    expect(endpointOf('/v1/responses')).toBe('responses');
    for (const p of ['/v1/completions/', '/V1/completions', '/v1/embeddings', '/', undefined]) expect(endpointOf(p)).toBeUndefined();
  });

  it('a streaming completions request with a text prompt is in scope, payload untouched', () => {
    const b = completions({ temperature: 0, custom: { a: 1 } });
    const raw = buf(b);
    expect(decideScope(raw, onCompletions)).toEqual({
      inScope: true,
      endpoint: 'completions',
      payload: b,
      multimodal: false,
      bodyBytes: raw.length,
      structured: false,
    });
  });

  it('completions exclusions: echo, logprobs, suffix, n/best_of, a list prompt, structured output, not streaming', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ echo: true }, 'completions-echo'],
      [{ logprobs: 0 }, 'completions-logprobs'],
      [{ suffix: ' the end' }, 'completions-suffix'],
      [{ n: 2 }, 'multiple-choices'],
      [{ best_of: 3 }, 'multiple-choices'],
      [{ prompt: ['a', 'b'] }, 'completions-prompt-not-text'],
      [{ prompt: [1, 2, 3] }, 'completions-prompt-not-text'],
      [{ response_format: { type: 'json_object' } }, 'structured-output'],
      [{ guided_regex: 'a+' }, 'structured-output'],
      [{ stream: false }, 'not-streaming'],
      [{ prompt: 7 }, 'not-completions-request'],
    ];
    for (const [extra, why] of cases) expect([extra, reason(decideScope(buf(completions(extra)), onCompletions))]).toEqual([extra, why]);
    // Allowed: what constrains or changes nothing.
    for (const extra of [
      { echo: false },
      { n: 1 },
      { best_of: 1 },
      { suffix: null },
      { response_format: { type: 'text' } },
      { logprobs: null },
    ])
      expect(reason(decideScope(buf(completions(extra)), onCompletions))).toBe('in-scope');
  });

  it('a chat body on the completions path is no completions request, and the reverse', () => {
    expect(reason(decideScope(buf(body()), onCompletions))).toBe('not-completions-request');
    expect(reason(decideScope(buf(completions()), cfg))).toBe('not-chat-request');
  });

  it('/v1/responses and other paths are not covered (passed through) before the body is read', () => {
    expect(decideScope(buf('not json'), { ...cfg, endpoint: 'responses' })).toEqual({
      inScope: false,
      reason: 'endpoint-not-covered',
      detail: 'responses',
    });
    expect(decideScope(buf(body()), { ...cfg, endpoint: undefined })).toEqual({
      inScope: false,
      reason: 'endpoint-not-covered',
      detail: 'other-path',
    });
  });
});
