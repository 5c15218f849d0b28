import { type SseEvent, SseParser } from '../../../src/sse/parser';
import { StreamTracker } from '../../../src/sse/tracker';

/** Builds an SseEvent the way the parser would from `data: <json>\n\n`. */
const ev = (data: unknown): SseEvent => {
  const s = typeof data === 'string' ? data : JSON.stringify(data);
  return { raw: Buffer.from(`data: ${s}\n\n`), data: s };
};
const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, finish: string | null = null) => ({
  id: 'chatcmpl-abc',
  object: 'chat.completion.chunk',
  model: 'qwen3',
  choices: [{ index: 0, delta, finish_reason: finish }],
  ...extra,
});
const feed = (t: StreamTracker, ...evs: SseEvent[]) => {
  for (const e of evs) t.apply(StreamTracker.read(e));
  return t;
};
const NONE = {
  json: {},
  hasDelta: false,
  reasoning: '',
  content: '',
  toolCall: false,
  finishReason: null,
  usage: false,
  reasoningField: null,
  toolCalls: null,
  malformedFinish: null,
};

describe('StreamTracker.read: classification', () => {
  it('[DONE], also with surrounding whitespace', () => {
    expect(StreamTracker.read(ev('[DONE]'))).toEqual({ kind: 'done', ...NONE });
    expect(StreamTracker.read({ raw: Buffer.alloc(0), data: ' [DONE] ' }).kind).toBe('done');
  });

  it('an event without data (comment, keep-alive) is "other"', () => {
    const [ka] = new SseParser().push(Buffer.from(': keep-alive\n\n'));
    expect(StreamTracker.read(ka)).toEqual({ kind: 'other', ...NONE });
  });

  it('in-band error {"error": ...} without choices', () => {
    const o = StreamTracker.read(ev({ error: { message: 'boom', type: 'internal', code: 500 } }));
    expect(o.kind).toBe('error');
    expect(o.json.error).toEqual({ message: 'boom', type: 'internal', code: 500 });
    expect(o.hasDelta).toBe(false);
  });

  it('an object with both error and choices is a chunk, not an error', () => {
    expect(StreamTracker.read(ev({ ...chunk({ content: 'x' }), error: null })).kind).toBe('chunk');
  });

  it('malformed: not JSON, truncated JSON, and JSON scalars', () => {
    for (const d of ['not json', '{"choices": [', 'null', '42', '"str"', 'true', '']) {
      expect({ d, o: StreamTracker.read({ raw: Buffer.from(`data: ${d}\n\n`), data: d }) }).toEqual({
        d,
        o: { kind: 'malformed', ...NONE },
      });
    }
  });

  it('role-only chunk: a chunk without delta', () => {
    const o = StreamTracker.read(ev(chunk({ role: 'assistant', content: '' })));
    expect(o).toMatchObject({
      kind: 'chunk',
      hasDelta: false,
      content: '',
      reasoning: '',
      toolCall: false,
      finishReason: null,
      usage: false,
    });
  });

  it('content delta', () => {
    expect(StreamTracker.read(ev(chunk({ content: 'Hello' })))).toMatchObject({
      kind: 'chunk',
      hasDelta: true,
      content: 'Hello',
      reasoning: '',
    });
  });

  it('reasoning via reasoning_content and via reasoning', () => {
    expect(StreamTracker.read(ev(chunk({ reasoning_content: 'think' })))).toMatchObject({
      hasDelta: true,
      reasoning: 'think',
      content: '',
    });
    expect(StreamTracker.read(ev(chunk({ reasoning: 'ponder' })))).toMatchObject({ hasDelta: true, reasoning: 'ponder', content: '' });
  });

  it('null content / reasoning are not deltas', () => {
    expect(StreamTracker.read(ev(chunk({ content: null, reasoning_content: null })))).toMatchObject({
      kind: 'chunk',
      hasDelta: false,
      content: '',
      reasoning: '',
    });
  });

  it('tool_calls: a non-empty array is a delta; an empty one is not', () => {
    const tc = [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }];
    expect(StreamTracker.read(ev(chunk({ tool_calls: tc })))).toMatchObject({ hasDelta: true, toolCall: true, content: '' });
    expect(StreamTracker.read(ev(chunk({ tool_calls: [] })))).toMatchObject({ hasDelta: false, toolCall: false });
  });

  it('finish_reason, including "abort"', () => {
    expect(StreamTracker.read(ev(chunk({}, {}, 'stop')))).toMatchObject({ kind: 'chunk', finishReason: 'stop', hasDelta: false });
    expect(StreamTracker.read(ev(chunk({}, {}, 'abort')))).toMatchObject({ finishReason: 'abort' });
  });

  it('usage-only chunk with choices []', () => {
    const o = StreamTracker.read(
      ev({
        id: 'chatcmpl-abc',
        object: 'chat.completion.chunk',
        choices: [],
        usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
      }),
    );
    expect(o).toMatchObject({ kind: 'chunk', hasDelta: false, usage: true, finishReason: null });
    expect(StreamTracker.read(ev(chunk({ content: 'x' }, { usage: null }))).usage).toBe(false);
  });

  it('choices with index != 0 are ignored; index 0 is found wherever it is; a missing index counts as 0', () => {
    expect(StreamTracker.read(ev({ choices: [{ index: 1, delta: { content: 'other' }, finish_reason: 'stop' }] }))).toMatchObject({
      kind: 'chunk',
      hasDelta: false,
      content: '',
      finishReason: null,
    });
    expect(
      StreamTracker.read(
        ev({
          choices: [
            { index: 1, delta: { content: 'other' } },
            { index: 0, delta: { content: 'mine' } },
          ],
        }),
      ),
    ).toMatchObject({ content: 'mine' });
    expect(StreamTracker.read(ev({ choices: [{ delta: { content: 'noindex' } }] }))).toMatchObject({ content: 'noindex' });
  });

  it('read() does not change any tracker state', () => {
    const t = new StreamTracker();
    StreamTracker.read(ev(chunk({ content: 'x' }, {}, 'stop')));
    expect(t).toMatchObject({ content: '', finishReason: null, id: null, doneSeen: false });
  });
});

describe('StreamTracker.apply: accumulated state', () => {
  it('a typical reasoning + content stream', () => {
    const t = feed(
      new StreamTracker(),
      ev(chunk({ role: 'assistant', content: '' })),
      ev(chunk({ reasoning_content: 'Let me ' })),
      ev(chunk({ reasoning_content: 'think.' })),
      ev(chunk({ content: 'The answer' })),
      ev(chunk({ content: ' is 42.' })),
      ev(chunk({}, {}, 'stop')),
      ev({ id: 'chatcmpl-abc', choices: [], usage: { completion_tokens: 9 } }),
      ev('[DONE]'),
    );
    expect(t).toMatchObject({
      reasoning: 'Let me think.',
      content: 'The answer is 42.',
      reasoningField: 'reasoning_content',
      toolCallsSeen: false,
      finishReason: 'stop',
      doneSeen: true,
      id: 'chatcmpl-abc',
      model: 'qwen3',
      malformed: 0,
    });
    expect(t.finished).toBe(true);
    expect(t.recoverable).toBe(true);
  });

  it('reasoningField is recorded from the first reasoning delta ("reasoning" dialect)', () => {
    const t = feed(
      new StreamTracker(),
      ev(chunk({ role: 'assistant' })),
      ev(chunk({ reasoning: 'a' })),
      ev(chunk({ reasoning_content: 'b' })),
    );
    expect(t.reasoningField).toBe('reasoning');
    expect(t.reasoning).toBe('ab');
  });

  it('reasoningField stays null until reasoning text arrives; an empty reasoning_content does not set it', () => {
    const t = feed(new StreamTracker(), ev(chunk({ reasoning_content: '' })), ev(chunk({ content: 'x' })));
    expect(t.reasoningField).toBeNull();
    feed(t, ev(chunk({ reasoning_content: 'r' })));
    expect(t.reasoningField).toBe('reasoning_content');
  });

  it('id and model come from the first chunk that has them', () => {
    const t = feed(
      new StreamTracker(),
      ev(chunk({ content: 'a' }, { id: 'first', model: 'm1' })),
      ev(chunk({ content: 'b' }, { id: 'second', model: 'm2' })),
    );
    expect([t.id, t.model]).toEqual(['first', 'm1']);
    const u = feed(
      new StreamTracker(),
      ev({ choices: [{ index: 0, delta: { content: 'a' } }] }),
      ev(chunk({ content: 'b' }, { id: 'late', model: 'ml' })),
    );
    expect([u.id, u.model]).toEqual(['late', 'ml']);
  });

  it('tool calls: toolCallsSeen, and recoverable is false even with text', () => {
    const t = feed(
      new StreamTracker(),
      ev(chunk({ content: 'calling a tool' })),
      ev(chunk({ tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] })),
    );
    expect(t.toolCallsSeen).toBe(true);
    expect(t.content).toBe('calling a tool');
    expect(t.recoverable).toBe(false);
  });

  it('finish_reason "abort" is not a normal end', () => {
    const t = feed(new StreamTracker(), ev(chunk({ content: 'x' })), ev(chunk({}, {}, 'abort')));
    expect(t.finishReason).toBe('abort');
    expect(t.finished).toBe(false);
    expect(t.recoverable).toBe(true);
  });

  it('finished for stop / length / tool_calls; a later null finish_reason does not clear it', () => {
    for (const f of ['stop', 'length', 'tool_calls']) expect(feed(new StreamTracker(), ev(chunk({}, {}, f))).finished).toBe(true);
    const t = feed(new StreamTracker(), ev(chunk({}, {}, 'stop')), ev(chunk({ content: '' })));
    expect(t.finishReason).toBe('stop');
  });

  it('nothing delivered: not finished, not recoverable', () => {
    const t = feed(new StreamTracker(), ev(chunk({ role: 'assistant', content: '' })));
    expect(t.finished).toBe(false);
    expect(t.recoverable).toBe(false);
  });

  it('reasoning alone is recoverable', () => {
    expect(feed(new StreamTracker(), ev(chunk({ reasoning: 'hmm' }))).recoverable).toBe(true);
  });

  it('error, malformed and done events update their counters / fields only', () => {
    const t = feed(new StreamTracker(), ev('nope'), ev('{bad'), ev({ error: { message: 'x' } }), ev('[DONE]'));
    expect(t).toMatchObject({ malformed: 2, doneSeen: true, content: '', id: null, finishReason: null });
  });

  it('the usage-only chunk leaves text and finish_reason alone but may supply the id', () => {
    const t = feed(new StreamTracker(), ev({ id: 'u1', model: 'mu', choices: [], usage: { total_tokens: 1 } }));
    expect(t).toMatchObject({ id: 'u1', model: 'mu', content: '', reasoning: '', finishReason: null });
  });

  it('choices with index != 0 never reach the accumulated text', () => {
    const t = feed(
      new StreamTracker(),
      ev({ id: 'x', choices: [{ index: 1, delta: { content: 'nope', reasoning: 'nope' }, finish_reason: 'stop' }] }),
    );
    expect(t).toMatchObject({ content: '', reasoning: '', reasoningField: null, finishReason: null });
  });

  it('events parsed from real SSE bytes (CJK split across chunks) accumulate exactly', () => {
    const bytes = Buffer.from(
      [
        '{"id":"z","model":"m","choices":[{"index":0,"delta":{"content":"你好"}}]}',
        '{"id":"z","choices":[{"index":0,"delta":{"content":"，世界🌍"}}]}',
      ]
        .map((d) => `data: ${d}\r\n\r\n`)
        .join(''),
    );
    const p = new SseParser();
    const t = new StreamTracker();
    for (let i = 0; i < bytes.length; i += 5) for (const e of p.push(bytes.subarray(i, i + 5))) t.apply(StreamTracker.read(e));
    expect(t.content).toBe('你好，世界🌍');
  });
});

describe('StreamTracker: delivered tool calls', () => {
  it('keeps the names and argument fragments of choice 0, for the delivered-token count', () => {
    const t = feed(
      new StreamTracker(),
      ev(chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }] })),
      ev(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": ' } }] })),
      ev(chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] })),
      ev({ ...chunk({}), choices: [{ index: 1, delta: { tool_calls: [{ index: 0, function: { name: 'other' } }] } }] }),
    );
    expect(t.toolCallsSeen).toBe(true);
    expect(t.toolCallText).toBe('get_weather{"city": "Paris"}');
    expect(t.content).toBe('');
  });
});
