// Exact accounting against the three /tokenize dialects (fake engines speaking each over real HTTP), the
// dialect detection, and every way of falling back to the estimate.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { designLeg2 } from '../../../src/recovery/continuation-request';
import { estimateRecoveredTokens } from '../../../src/recovery/token-estimate';
import { correctUsage } from '../../../src/recovery/usage';
import { applyTemplateUrl, forgetDetectedDialects } from '../../../src/upstream/tokenize-dialects';
import { type CountOptions, countRecoveredTokens } from '../../../src/upstream/tokenizer';
import { answerFor, promptTokenCount, withoutTrailingAssistant } from '../../../tools/fake-engine/answer';
import { planRequest } from '../../../tools/fake-engine/plan';
import { type FakeEngine, startFakeEngine, type TokenizerDialect } from '../../../tools/fake-engine/server';
import { tokenize } from '../../../tools/fake-engine/tokens';

const RATES = { cjk: 1.6, other: 4 };
const payload = {
  model: 'm',
  stream: true,
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Tell me about continuation.' },
  ],
};
const answer = answerFor(payload.messages, { reasoning: 12, content: 14 });
// Cut after 12 reasoning + 5 content tokens, as a crash at token 17 would.
const reasoning = answer.reasoningTokens.join('');
const content = answer.contentTokens.slice(0, 5).join('');
const designed = designLeg2(payload, { reasoning, content, toolCallsSeen: false }, { continuationModel: 'generic-test', engine: 'sglang' });
if (!('raw' in designed.design) || designed.design.raw === undefined) throw new Error('generic always has a design');
const prefix = designed.design.raw;

const engines: Record<TokenizerDialect, FakeEngine> = {} as any;
beforeAll(async () => {
  for (const d of ['sglang', 'vllm', 'llamacpp'] as const) {
    engines[d] = await startFakeEngine({ name: `tok-${d}`, dialect: d === 'sglang' ? 'sglang' : 'vllm', tokenizer: d, tokenIntervalMs: 0 });
  }
});
afterAll(async () => {
  await Promise.all(Object.values(engines).map((e) => e.close()));
});
beforeEach(() => forgetDetectedDialects());

function opts(
  url: string | undefined,
  dialect: CountOptions['dialect'],
  extra: Partial<CountOptions> = {},
): CountOptions & { fallbacks: string[]; details: string[] } {
  const fallbacks: string[] = [];
  const details: string[] = [];
  return {
    url,
    dialect,
    rates: RATES,
    prefix,
    onFallback: (detail, code) => {
      details.push(detail);
      fallbacks.push(code);
    },
    deadlineMs: 2000,
    fallbacks,
    details,
    ...extra,
  };
}

/** What the fake engine reports as leg 2's usage for this continuation. */
function leg2Usage(p: any): { prompt_tokens: number; completion_tokens: number } {
  const body = {
    ...p,
    messages: [...p.messages, { role: 'assistant', content: prefix }],
    continue_final_message: true,
    add_generation_prompt: false,
  };
  const planned = planRequest(body, { 'x-fake-answer-tokens': '12,14' }, 'vllm', 'generic');
  if (!planned.ok) throw new Error(planned.message);
  return { prompt_tokens: planned.plan.promptTokens, completion_tokens: planned.plan.deltas.length };
}

describe.each([
  ['sglang', 'leg2-minus-prefix'],
  ['vllm', 'template'],
  ['llamacpp', 'template'],
] as const)('%s /tokenize', (dialect, promptMethod) => {
  test.each(['configured', 'auto'] as const)('%s: exact counts; corrected usage equals the uninterrupted run', async (how) => {
    const o = opts(`${engines[dialect].url}/tokenize`, how === 'auto' ? 'auto' : dialect);
    const c = await countRecoveredTokens(payload, reasoning, content, o);
    expect(o.fallbacks).toEqual([]);
    expect(c.method).toBe('tokenize');
    expect(c.accounting).toEqual({ method: 'tokenize', dialect, prompt: promptMethod });
    expect(c.reasoningTokens).toBe(12);
    expect(c.contentTokens).toBe(5);
    expect(c.totalRecovered).toBe(17);
    expect(c.prefixTokens).toBe(tokenize(prefix).length);
    const exactPrompt = promptTokenCount(payload.messages);
    // The estimate misses the pseudo template's tokens: the exact count must differ from it here.
    expect(estimateRecoveredTokens(payload, reasoning, content, RATES).promptTokens).not.toBe(exactPrompt);
    if (promptMethod === 'template') expect(c.promptTokens).toBe(exactPrompt);
    const usage = correctUsage(leg2Usage(payload), c, false);
    expect(usage.prompt_tokens).toBe(exactPrompt);
    expect(usage.completion_tokens).toBe(12 + 14);
  });
});

test('auto detects once per URL, then reuses the dialect', async () => {
  const e = engines.llamacpp;
  const url = `${e.url}/tokenize`;
  const before = e.requests.length;
  await countRecoveredTokens(payload, reasoning, content, opts(url, 'auto'));
  const first = e.requests.length - before;
  await countRecoveredTokens(payload, reasoning, content, opts(url, 'auto'));
  const second = e.requests.length - before - first;
  // First: probe + reasoning + content + prefix + apply-template + prompt tokenize; then no probe.
  expect(first).toBe(6);
  expect(second).toBe(5);
});

test('llama.cpp: the prompt is the templated original request tokenized with special tokens', async () => {
  const e = engines.llamacpp;
  const before = e.requests.length;
  await countRecoveredTokens(payload, reasoning, content, opts(`${e.url}/tokenize`, 'llamacpp'));
  const seen = e.requests.slice(before);
  const tpl = seen.find((r) => r.path === '/apply-template');
  expect(tpl?.body.messages).toEqual(payload.messages);
  const promptCall = seen.find((r) => r.path === '/tokenize' && r.body.add_special === true);
  expect(promptCall?.body.content.startsWith('<|im_start|>system')).toBe(true);
  for (const r of seen.filter((x) => x.path === '/tokenize' && x !== promptCall))
    expect(r.body).toMatchObject({ add_special: false, parse_special: true });
});

test('vLLM: the prompt is counted from the messages with the template fields and the chat defaults', async () => {
  const e = engines.vllm;
  const before = e.requests.length;
  const withTools = {
    ...payload,
    tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
    chat_template_kwargs: { thinking: true },
  };
  await countRecoveredTokens(withTools, reasoning, content, opts(`${e.url}/tokenize`, 'vllm'));
  const msg = e.requests.slice(before).find((r) => Array.isArray(r.body.messages));
  expect(msg?.body).toMatchObject({
    model: 'm',
    add_generation_prompt: true,
    continue_final_message: false,
    add_special_tokens: false,
    tools: withTools.tools,
    chat_template_kwargs: { thinking: true },
  });
});

test('multimodal: no template count, the prompt is leg 2 minus the counted prefix', async () => {
  const mm = {
    ...payload,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Describe.' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        ],
      },
    ],
  };
  const c = await countRecoveredTokens(mm, reasoning, content, opts(`${engines.vllm.url}/tokenize`, 'vllm'));
  expect(c.accounting.prompt).toBe('leg2-minus-prefix');
  expect(correctUsage({ prompt_tokens: 500 + (c.prefixTokens as number), completion_tokens: 3 }, c, true).prompt_tokens).toBe(500);
});

describe('falling back to the estimate, said in the result', () => {
  let server: http.Server;
  let base = '';
  let handler: (req: http.IncomingMessage, body: any, res: http.ServerResponse) => void = () => undefined;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => handler(req, raw ? JSON.parse(raw) : undefined, res));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  test('no TOKENIZE_URL: the estimate, no fallback reason', async () => {
    const o = opts(undefined, 'auto');
    const c = await countRecoveredTokens(payload, reasoning, content, o);
    expect(c.accounting).toEqual({ method: 'estimate', dialect: null, prompt: 'estimate' });
    expect(o.fallbacks).toEqual([]);
  });

  test('a vLLM/SGLang body sent to llama.cpp ({tokens: []}) is never taken as 0 tokens', async () => {
    const o = opts(`${engines.llamacpp.url}/tokenize`, 'vllm');
    const c = await countRecoveredTokens(payload, reasoning, content, o);
    expect(c.method).toBe('estimate');
    expect(c.accounting.fallback).toBe('tokenize-bad-answer');
    expect(o.details[0]).toMatch(/0 tokens for a non-empty text/);
    expect(o.fallbacks).toHaveLength(1);
    expect(c.totalRecovered).toBe(estimateRecoveredTokens(payload, reasoning, content, RATES).totalRecovered);
  });

  test('unreachable: the estimate with a stable code; the error text goes to the log only', async () => {
    const o = opts('http://127.0.0.1:9/tokenize', 'auto');
    const c = await countRecoveredTokens(payload, reasoning, content, o);
    expect(c.accounting.method).toBe('estimate');
    expect(c.accounting.fallback).toBe('tokenize-unreachable');
    expect(o.fallbacks).toEqual([c.accounting.fallback]);
    expect(JSON.stringify(c)).not.toContain('127.0.0.1');
  });

  test('slower than the deadline: the estimate, "timeout"', async () => {
    handler = () => undefined; // never answers
    const o = opts(`${base}/tokenize`, 'sglang', { deadlineMs: 50 });
    const t0 = Date.now();
    const c = await countRecoveredTokens(payload, reasoning, content, o);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(c.accounting.fallback).toBe('tokenize-timeout');
    expect(o.details).toEqual(['timeout after 50 ms']);
  });

  test('auto: a /tokenize that is none of the three falls back, and detection is tried again next time', async () => {
    let calls = 0;
    handler = (_req, _b, res) => {
      calls++;
      json(res, 200, { ids: [1, 2] });
    };
    const o = opts(`${base}/tokenize`, 'auto');
    const c = await countRecoveredTokens(payload, reasoning, content, o);
    expect(c.accounting.fallback).toBe('tokenize-bad-answer');
    expect(o.details[0]).toMatch(/neither SGLang\/vLLM/);
    await countRecoveredTokens(payload, reasoning, content, o);
    expect(calls).toBe(2);
  });

  test('a 500 falls back', async () => {
    handler = (_req, _b, res) => json(res, 500, { error: 'boom' });
    const c = await countRecoveredTokens(payload, reasoning, content, opts(`${base}/tokenize`, 'vllm'));
    expect(c.accounting.fallback).toBe('tokenize-error-status');
  });

  test('llama.cpp without /apply-template: still exact, the prompt from leg 2 minus the prefix', async () => {
    handler = (req, b, res) => {
      if (req.url === '/tokenize')
        return json(res, 200, { tokens: typeof b?.content === 'string' ? tokenize(b.content).map((_, i) => i) : [] });
      json(res, 404, { error: 'no route' });
    };
    const c = await countRecoveredTokens(payload, reasoning, content, opts(`${base}/tokenize`, 'llamacpp'));
    expect(c.accounting).toEqual({ method: 'tokenize', dialect: 'llamacpp', prompt: 'leg2-minus-prefix' });
    expect(correctUsage(leg2Usage(payload), c, false).prompt_tokens).toBe(promptTokenCount(withoutTrailingAssistant(payload.messages)));
  });
});

test('applyTemplateUrl: the last path segment of TOKENIZE_URL', () => {
  expect(applyTemplateUrl('http://e:8080/tokenize')).toBe('http://e:8080/apply-template');
  expect(applyTemplateUrl('http://e:8080/llama/tokenize')).toBe('http://e:8080/llama/apply-template');
  expect(applyTemplateUrl('http://e:8080')).toBe('http://e:8080/apply-template');
});
