// CHAT_TEMPLATE=auto (src/templates/provider.ts) against a local HTTP server (port 0) answering GET /props as
// llama-server does (chat_template, bos_token, eos_token beside the rest), or not yet: asked only on llama.cpp,
// again with a bounded backoff until it answers, logged when it first does; never asked on vLLM (which serves no
// template to read), refused on SGLang.
import * as fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger } from '../../../src/obs/logger';
import { ChatTemplateConfigError, propsRetryDelay, templateProvider } from '../../../src/templates/provider';
import { captureLogs } from '../../support/log-capture';

const PROPS = {
  default_generation_settings: { n_ctx: 2048 },
  total_slots: 2,
  model_path: '/models/model.gguf',
  chat_template: '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}',
  bos_token: '<s>',
  eos_token: '</s>',
  build_info: 'b1-80fb11a',
};

interface Props {
  url: string;
  times: number[];
  close(): Promise<void>;
}

/** GET /props: 503 (loading) for the first `loading` requests, then PROPS. */
async function propsServer(loading: number): Promise<Props> {
  const times: number[] = [];
  const server = http.createServer((req, res) => {
    if (req.url !== '/props') {
      res.writeHead(404).end();
      return;
    }
    times.push(performance.now());
    const ready = times.length > loading;
    res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
    res.end(JSON.stringify(ready ? PROPS : { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    times,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

const until = async (ok: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('CHAT_TEMPLATE=auto', () => {
  test('llama.cpp: asked until /props answers, the delays doubling; logged once when it first answers', async () => {
    const engine = await propsServer(3);
    const capture = captureLogs();
    const p = await templateProvider('auto', {
      engine: 'llamacpp',
      baseUrl: engine.url,
      log: createLogger('info', capture.sink),
      retryMs: 40,
      maxRetryMs: 1000,
    });
    try {
      expect(p.served()).toBeUndefined();
      await until(() => p.served() !== undefined);
      expect(p.served()).toMatchObject({ origin: 'the engine (GET /props)', special: { bos_token: '<s>', eos_token: '</s>' } });
      expect(engine.times).toHaveLength(4);
      const gaps = engine.times.slice(1).map((t, k) => t - engine.times[k]);
      // 40, 80, 160 ms (timers fire no earlier than asked).
      gaps.forEach((g, k) => expect(g).toBeGreaterThanOrEqual(40 * 2 ** k - 5));
      const loaded = capture.records({ decision: 'TEMPLATE_LOADED' });
      expect(loaded).toEqual([expect.objectContaining({ attempts: 4, origin: 'the engine (GET /props)' })]);
      expect(loaded[0].msg).toMatch(/llama-server answered its template/);
      expect(capture.logs.filter((l) => /has no template yet/.test(l.msg))).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 200));
      expect(engine.times).toHaveLength(4); // answered: not asked again
    } finally {
      p.stop();
      await engine.close();
    }
  });

  test('the backoff is bounded: retryMs doubling, never over maxRetryMs', () => {
    const o = { retryMs: 1000, maxRetryMs: 30_000 };
    expect([1, 2, 3, 4, 5, 6, 7, 100].map((n) => propsRetryDelay(n, o))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  test('stop() ends the polling: no request after it', async () => {
    const engine = await propsServer(Number.POSITIVE_INFINITY);
    const p = await templateProvider('auto', { engine: 'llamacpp', baseUrl: engine.url, log: createLogger('silent'), retryMs: 20 });
    await until(() => engine.times.length >= 2);
    p.stop();
    const n = engine.times.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(engine.times.length).toBeLessThanOrEqual(n + 1); // at most the one already in flight
    await engine.close();
  });

  test('vLLM: /props is never asked (vLLM serves no template to read); the engine’s /tokenize checks instead', async () => {
    const engine = await propsServer(0);
    const p = await templateProvider('auto', { engine: 'vllm', baseUrl: engine.url, log: createLogger('silent'), retryMs: 10 });
    await new Promise((r) => setTimeout(r, 100));
    expect(p.served()).toBeUndefined();
    expect(engine.times).toHaveLength(0);
    p.stop();
    await engine.close();
  });

  test('SGLang: a configuration error naming the variable', async () => {
    await expect(
      templateProvider('auto', { engine: 'sglang', baseUrl: 'http://127.0.0.1:1', log: createLogger('silent') }),
    ).rejects.toThrow(ChatTemplateConfigError);
    await expect(
      templateProvider('auto', { engine: 'sglang', baseUrl: 'http://127.0.0.1:1', log: createLogger('silent') }),
    ).rejects.toThrow(/CHAT_TEMPLATE=auto cannot be used with CONTINUATION_ENGINE=sglang/);
  });
});

describe('CHAT_TEMPLATE=<file>: TEMPLATE_LOADED', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'template-loaded-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  async function loaded(setting: string) {
    const capture = captureLogs();
    const p = await templateProvider(setting, {
      engine: 'llamacpp',
      baseUrl: 'http://127.0.0.1:1',
      log: createLogger('info', capture.sink),
    });
    p.stop();
    return capture.records({ decision: 'TEMPLATE_LOADED' });
  }

  test('a bare .jinja that prints bos_token: a warning naming the missing token, never the template text', async () => {
    const file = path.join(dir, 'bare.jinja');
    fs.writeFileSync(file, PROPS.chat_template);
    const [rec] = await loaded(file);
    expect(rec).toMatchObject({ level: 'warn', missing_special_tokens: ['bos_token'] });
    expect(JSON.stringify(rec)).not.toContain('m.content');
  });

  test('the same template beside its tokenizer_config.json: read, nothing missing', async () => {
    const model = path.join(dir, 'model');
    fs.mkdirSync(model);
    fs.writeFileSync(path.join(model, 'chat_template.jinja'), PROPS.chat_template);
    fs.writeFileSync(path.join(model, 'tokenizer_config.json'), JSON.stringify({ bos_token: '<s>', eos_token: '</s>' }));
    const [rec] = await loaded(model);
    expect(rec).toMatchObject({ level: 'info' });
    expect(rec.missing_special_tokens).toBeUndefined();
  });
});
