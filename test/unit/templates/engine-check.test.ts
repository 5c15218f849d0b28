// The engine's own check of leg 2 (src/templates/engine-check.ts) against local HTTP servers (node:http, port 0)
// answering as the engines do, over real HTTP through the same client the sidecar uses:
//   - vLLM 0.33.0's /tokenize (vllm/entrypoints/serve/tokenize/): a chat body is rendered through the served
//     template and tokenized, a text body tokenized as it is (serving.py L57-135); the answer is TokenizeResponse
//     {count, max_model_len, tokens, token_strs} (protocol.py L182-186); continue_final_message with
//     add_generation_prompt is refused (protocol.py L119-128) with an ErrorResponse {error: {message, type,
//     param, code}} and that status (api_router.py L35-56, serve/engine/protocol.py L79-87). Here the template is
//     rendered by vLLM's rule as src/templates/engine-prompt.ts restates it (held equal to vLLM's code by
//     test/unit/templates/engine-prompt.test.ts) and tokenized by Qwen3's real tokenizer.json through Hugging
//     Face's `tokenizers` (the Rust tokenizer vLLM loads through transformers).
//   - llama-server's /apply-template: oaicompat_chat_params_parse, then {"prompt": ...}
//     (tools/server/server-context.cpp post_apply_template); a final assistant message is popped, the rest
//     rendered with the generation prompt, and its content appended (the prefill, tools/server/server-common.cpp);
//     with reasoning_content, the structured continuation docs/families.md describes for 80fb11a (the generation
//     prompt up to its opening marker, the marker, the reasoning); a template's leading BOS text dropped when the
//     vocabulary adds one; errors as {"error": {"code", "message", "type"}}.
// Cases: agreement, a difference (with the token it is at), llama.cpp's whitespace overlap, malformed and error
// answers, a late answer (timeout) and no server: never an agreement, always `unavailable`.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import type { Tokenizer } from 'tokenizers';
import { type Designed, designLeg2 } from '../../../src/recovery/leg2-design';
import { type EngineCheckInput, engineCheck } from '../../../src/templates/engine-check';
import { enginePrompt } from '../../../src/templates/engine-prompt';
import { ChatTemplate } from '../../../src/templates/renderer';
import { serveTemplates } from '../../../src/templates/served';
import { CHECKPOINTS } from '../../fidelity/checkpoints';
import { provisionAssets } from '../../fidelity/harness-client';

jest.setTimeout(60_000);

const ROOT = path.resolve(__dirname, '..', '..', '..', '..');
const templates = provisionAssets().templates;
const read = (file: string) => fs.readFileSync(path.join(templates, file), 'utf8');
const published = (checkpoint: string) => {
  const c = CHECKPOINTS.find((x) => x.checkpoint === checkpoint);
  if (!c?.base || !c.derive) throw new Error(`no derived form for ${checkpoint}`);
  return c.derive(read(c.base));
};
const QWQ = published('Qwen/QwQ-32B');
/** The same template with a default system prompt where the conversation has none (an edited ConfigMap copy). */
const QWQ_DEFAULT_SYSTEM = QWQ.replace(
  "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n  {%- endif %}",
  "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n  {%- else %}\n        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}\n  {%- endif %}",
);
const R1 = read('deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
const R1_SPECIAL = { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' };
const NOW = new Date(2026, 5, 1, 12, 0, 0);

let qwen3: Tokenizer;
beforeAll(() => {
  const dir = execFileSync('bash', [path.join(ROOT, 'scripts', 'tokenizer-assets.sh')], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .pop();
  const { Tokenizer: T } = require('tokenizers') as typeof import('tokenizers');
  qwen3 = T.fromFile(path.join(dir as string, 'qwen3', 'tokenizer.json'));
});

const body = (extra: Record<string, unknown> = {}) => ({
  model: 'served-model',
  stream: true,
  messages: [{ role: 'user', content: 'What is the answer?' }],
  ...extra,
});

// ---- the servers -------------------------------------------------------------------------------------------

interface Seen {
  path: string;
  body: any;
}
type Answer = { status: number; json?: unknown; text?: string } | 'hang' | 'reset';
interface Engine {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

async function serve(answer: (s: Seen, n: number) => Answer | Promise<Answer>): Promise<Engine> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', async () => {
      const s = { path: req.url ?? '/', body: JSON.parse(Buffer.concat(parts).toString('utf8') || 'null') };
      seen.push(s);
      const a = await answer(s, seen.length);
      if (a === 'hang') return; // never answered: closed with the server
      if (a === 'reset') return req.socket.destroy();
      const text = a.text ?? JSON.stringify(a.json);
      res.writeHead(a.status, { 'content-type': a.text === undefined ? 'application/json' : 'text/plain' });
      res.end(text);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

const vllmError = (status: number, message: string) => ({
  status,
  json: { error: { message, type: 'BadRequestError', param: null, code: status } },
});

/** vLLM's /tokenize serving `template`, tokenized by Qwen3's tokenizer. */
function vllmAnswer(template: string): (s: Seen) => Promise<Answer> {
  const t = new ChatTemplate(template);
  return async ({ path: p, body: b }) => {
    if (p !== '/tokenize') return vllmError(404, `no route ${p}`);
    let text: string;
    let special: boolean;
    if (Array.isArray(b?.messages)) {
      if (b.continue_final_message && b.add_generation_prompt)
        return vllmError(400, 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
      text = enginePrompt('vllm', b, { template: t, special: {}, now: NOW });
      special = b.add_special_tokens ?? false; // TokenizeChatRequest's default
    } else {
      text = String(b?.prompt);
      special = b?.add_special_tokens ?? true; // TokenizeCompletionRequest's default
    }
    const tokens = Array.from((await qwen3.encode(text, null, { addSpecialTokens: special })).getIds());
    return { status: 200, json: { count: tokens.length, max_model_len: 32768, tokens, token_strs: null } };
  };
}

/** llama-server's /apply-template serving `template` (the R1 distills' form opens `<think>\n`). */
function llamacppAnswer(template: string, special: Record<string, string>): (s: Seen) => Answer {
  const t = new ChatTemplate(template);
  const bos = special.bos_token ?? '';
  return ({ path: p, body: b }) => {
    if (p !== '/apply-template') return { status: 404, json: { error: { code: 404, message: 'File Not Found', type: 'not_found_error' } } };
    const messages = [...b.messages];
    const last = messages.at(-1)?.role === 'assistant' ? messages.pop() : undefined;
    if (messages.at(-1)?.role === 'assistant')
      return {
        status: 400,
        json: {
          error: { code: 400, message: 'Cannot have 2 or more assistant messages at the end of the list.', type: 'invalid_request_error' },
        },
      };
    let prompt = t.render({
      messages,
      addGenerationPrompt: last !== undefined || b.add_generation_prompt !== false,
      variables: special,
      now: NOW,
    });
    if (bos && prompt.startsWith(bos)) prompt = prompt.slice(bos.length);
    if (last?.reasoning_content) {
      const open = prompt.lastIndexOf('<think>');
      prompt = `${prompt.slice(0, open)}<think>${last.reasoning_content}${last.content ? `</think>${last.content}` : ''}`;
    } else if (last) prompt += last.content ?? '';
    return { status: 200, json: { prompt } };
  };
}

let engines: Engine[] = [];
const start = async (answer: Parameters<typeof serve>[0]) => {
  const e = await serve(answer);
  engines.push(e);
  return e;
};
afterEach(async () => {
  await Promise.all(engines.map((e) => e.close()));
  engines = [];
});

const design = (d: Designed) => {
  if ('unsupported' in d) throw new Error(`refused: ${d.reason}:${d.unsupported}`);
  return d.design;
};

/** What src/continuation/template/leg2-prepare.ts asks the engine for a design. */
function inputFor(engine: 'vllm' | 'llamacpp', url: string, original: any, d: ReturnType<typeof design>, ms = 5000): EngineCheckInput {
  return {
    engine,
    tokenizeUrl: `${url}/tokenize`,
    original,
    candidates: d.candidates ?? [d.shape.message],
    fields: d.shape.fields,
    raw: d.raw,
    prompt1: d.prompt1,
    signal: AbortSignal.timeout(ms),
  };
}

// ---- vLLM --------------------------------------------------------------------------------------------------

describe("vLLM's chat /tokenize", () => {
  const templatePath = (delivered: { reasoning: string; content: string }, served = QWQ) =>
    design(
      designLeg2(body(), delivered, {
        continuationModel: 'acme/house-reasoner',
        engine: 'vllm',
        served: serveTemplates({ default: served }, {}, 'test'),
        clock: { leg1At: NOW, now: NOW },
      }),
    );

  test.each([
    ['inside the reasoning', { reasoning: 'Let me think', content: '' }],
    ['inside the content', { reasoning: 'Let me think.\n', content: '\n\nThe answer' }],
  ])('agrees, %s: leg 2 (chat) has exactly the tokens of our uninterrupted prompt plus the raw text (text)', async (_, delivered) => {
    const e = await start(vllmAnswer(QWQ));
    const d = templatePath(delivered);
    const v = await engineCheck(inputFor('vllm', e.url, body(), d));
    expect(v).toEqual({ kind: 'agrees', message: d.candidates?.[0] });
    const [chat, text] = [e.seen.find((s) => s.body.messages), e.seen.find((s) => typeof s.body.prompt === 'string')];
    expect(chat?.body).toMatchObject({ continue_final_message: true, add_generation_prompt: false, add_special_tokens: false });
    expect(chat?.body.messages.at(-1)).toEqual({ role: 'assistant', ...d.candidates?.[0] });
    expect(text?.body).toMatchObject({ prompt: `${d.prompt1}${d.raw}`, add_special_tokens: false });
  });

  test('differs: the engine serves a copy with a default system prompt; the token where they part is reported', async () => {
    const e = await start(vllmAnswer(QWQ_DEFAULT_SYSTEM));
    expect(QWQ_DEFAULT_SYSTEM).not.toBe(QWQ);
    const v = await engineCheck(inputFor('vllm', e.url, body(), templatePath({ reasoning: 'Let me think', content: '' })));
    // <|im_start|> is token 0 of both; then `system` where we expect `user`.
    expect(v).toEqual({ kind: 'differs', detail: 'engine-prompt-differs', tokenAt: 1 });
  });

  test('without our render (CHAT_TEMPLATE=auto): leg 2 against the original request’s chat tokens, then the raw text’s', async () => {
    const e = await start(vllmAnswer(read('Qwen-Qwen3-0.6B.jinja')));
    const delivered = { reasoning: '\nr\n', content: '\n\nThe' };
    const d = design(designLeg2(body(), delivered, { continuationModel: 'Qwen/Qwen3-32B', engine: 'vllm' }));
    expect(d.prompt1).toBeUndefined();
    const v = await engineCheck(inputFor('vllm', e.url, body(), d));
    expect(v).toEqual({ kind: 'agrees', message: d.shape.message });
    const chats = e.seen.filter((s) => s.body.messages).map((s) => s.body);
    expect(chats.map((c) => [c.add_generation_prompt, c.continue_final_message])).toEqual(
      expect.arrayContaining([
        [false, true],
        [true, false],
      ]),
    );
    // The same engine serving another template (QwQ's generation prompt opens <think>): it says so.
    const other = await start(vllmAnswer(QWQ));
    const w = await engineCheck(inputFor('vllm', other.url, body(), d));
    expect(w).toMatchObject({ kind: 'differs', detail: 'engine-prompt-differs' });
    expect(typeof (w as { tokenAt?: number }).tokenAt).toBe('number');
  });

  test('a keep-alive connection the server closed as it was reused: sent once more, then answered', async () => {
    const answer = vllmAnswer(QWQ);
    const e = await start((s, n) => (n === 1 ? 'reset' : answer(s)));
    const d = templatePath({ reasoning: 'Let me think', content: '' });
    expect(await engineCheck(inputFor('vllm', e.url, body(), d))).toMatchObject({ kind: 'agrees' });
    expect(e.seen.length).toBe(3);
  });

  test.each<[string, string, Answer]>([
    ['an error answer (vLLM’s ErrorResponse)', 'error-status', vllmError(400, 'The model `served-model` does not exist.')],
    ['200 without tokens', 'bad-answer', { status: 200, json: { count: 3, max_model_len: 32768 } }],
    ['200 with a body that is not JSON', 'bad-answer', { status: 200, text: 'Internal Server Error' }],
    ['200 with JSON that is not an object', 'bad-answer', { status: 200, json: [1, 2, 3] }],
  ])('%s: unavailable (%s), never an agreement', async (_, detail, answer) => {
    const e = await start(() => answer);
    const v = await engineCheck(inputFor('vllm', e.url, body(), templatePath({ reasoning: 'Let me think', content: '' })));
    expect(v).toEqual({ kind: 'unavailable', detail });
  });

  test('no answer within the deadline: unavailable (timeout), at the deadline', async () => {
    const e = await start(() => 'hang');
    const started = performance.now();
    const v = await engineCheck(inputFor('vllm', e.url, body(), templatePath({ reasoning: 'Let me think', content: '' }), 150));
    expect(v).toEqual({ kind: 'unavailable', detail: 'timeout' });
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test('nothing listening: unavailable (unreachable)', async () => {
    const e = await serve(() => ({ status: 200, json: {} }));
    await e.close(); // its port, now closed
    const v = await engineCheck(inputFor('vllm', e.url, body(), templatePath({ reasoning: 'Let me think', content: '' })));
    expect(v).toEqual({ kind: 'unavailable', detail: 'unreachable' });
  });
});

// ---- llama.cpp ---------------------------------------------------------------------------------------------

describe("llama-server's /apply-template", () => {
  const r1 = new ChatTemplate(R1);
  /** Our render of the uninterrupted prompt (the template path's prompt1: the template's text, BOS included). */
  const prompt1 = r1.render({ messages: body().messages, addGenerationPrompt: true, variables: R1_SPECIAL, now: NOW });
  const input = (url: string, o: Partial<EngineCheckInput>): EngineCheckInput => ({
    engine: 'llamacpp',
    tokenizeUrl: `${url}/tokenize`,
    original: body(),
    candidates: [],
    raw: '',
    bosToken: R1_SPECIAL.bos_token,
    signal: AbortSignal.timeout(5000),
    ...o,
  });

  test('agrees: the first candidate shape whose rendering is the original’s plus the raw text is the one sent', async () => {
    const e = await start(llamacppAnswer(R1, R1_SPECIAL));
    expect(prompt1.endsWith('<｜Assistant｜><think>\n')).toBe(true);
    const candidates = [{ content: '', reasoning_content: 'Let me think' }, { content: 'Let me think' }];
    const v = await engineCheck(input(e.url, { candidates, raw: 'Let me think', prompt1 }));
    // The structured form renders `<think>Let me think` (the prompt's `\n` gone): not the raw text after the prompt.
    expect(v).toEqual({ kind: 'agrees', message: { content: 'Let me think' } });
    expect(e.seen.map((s) => s.path)).toEqual(['/apply-template', '/apply-template', '/apply-template']);
    expect(e.seen.find((s) => s.body.messages.length === 2)?.body).toMatchObject({
      continue_final_message: true,
      add_generation_prompt: false,
    });
  });

  test('the overlap: the parser handed the generation prompt’s `\\n` after <think> out as reasoning; allowed once', async () => {
    const e = await start(llamacppAnswer(R1, R1_SPECIAL));
    const raw = '\nLet me think';
    const v = await engineCheck(input(e.url, { candidates: [{ content: '', reasoning_content: raw }], raw, prompt1 }));
    expect(v).toEqual({ kind: 'agrees', message: { content: '', reasoning_content: raw } });
    // Without the overlap (delivered reasoning that does not start with it), that shape drops the prompt's `\n`:
    // a difference at the prompt's last character.
    const w = await engineCheck(
      input(e.url, { candidates: [{ content: '', reasoning_content: 'Let me think' }], raw: 'Let me think', prompt1 }),
    );
    const engine1 = prompt1.slice(R1_SPECIAL.bos_token.length);
    expect(w).toMatchObject({ kind: 'differs', detail: 'engine-prompt-differs', diff: { at: engine1.length - 1 } });
  });

  test('llama-server drops the leading BOS text its vocabulary adds itself: no difference for that', async () => {
    const e = await start(llamacppAnswer(R1, R1_SPECIAL));
    expect(prompt1.startsWith(R1_SPECIAL.bos_token)).toBe(true);
    const candidates = [{ content: 'Let me think' }];
    expect(await engineCheck(input(e.url, { candidates, raw: 'Let me think', prompt1 }))).toMatchObject({ kind: 'agrees' });
    // Without the BOS token named, the prompts part inside the BOS text (both begin `<｜`).
    const v = await engineCheck(input(e.url, { candidates, raw: 'Let me think', prompt1, bosToken: undefined }));
    expect(v).toMatchObject({ kind: 'differs', detail: 'engine-disagrees-with-template', diff: { at: 2 } });
  });

  test('differs: the engine serves another template than ours (offsets and lengths, never text)', async () => {
    const e = await start(llamacppAnswer(read('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja'), R1_SPECIAL));
    const v = await engineCheck(input(e.url, { candidates: [{ content: 'Let me think' }], raw: 'Let me think', prompt1 }));
    expect(v).toMatchObject({ kind: 'differs', detail: 'engine-disagrees-with-template' });
    const diff = (v as { diff: { at: number; expectedLength: number; actualLength: number } }).diff;
    expect(Object.keys(diff).sort()).toEqual(['actualLength', 'at', 'expectedLength']);
    expect(diff.at).toBeGreaterThan(0);
  });

  test.each<[string, string, Answer]>([
    [
      'an error answer (llama-server’s error body)',
      'error-status',
      {
        status: 400,
        json: {
          error: { code: 400, message: 'Assistant response prefill is incompatible with enable_thinking.', type: 'invalid_request_error' },
        },
      },
    ],
    ['200 without a prompt (a /tokenize-like answer)', 'bad-answer', { status: 200, json: { tokens: [] } }],
    ['200 with a prompt that is not a string', 'bad-answer', { status: 200, json: { prompt: ['<think>'] } }],
  ])('%s: unavailable (%s)', async (_, detail, answer) => {
    const e = await start(() => answer);
    const v = await engineCheck(input(e.url, { candidates: [{ content: 'x' }], raw: 'x', prompt1 }));
    expect(v).toEqual({ kind: 'unavailable', detail });
  });

  test('no answer within the deadline: unavailable (timeout)', async () => {
    const e = await start(() => 'hang');
    const v = await engineCheck(input(e.url, { candidates: [{ content: 'x' }], raw: 'x', prompt1, signal: AbortSignal.timeout(150) }));
    expect(v).toEqual({ kind: 'unavailable', detail: 'timeout' });
  });
});
