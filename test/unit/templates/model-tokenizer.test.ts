// TOKENIZER (src/templates/model-tokenizer.ts): real tokenizers (Qwen3's and gpt-oss's tokenizer.json as npm
// packages ship them, scripts/tokenizer-assets.sh) count every text exactly as the engines' tokenizer does:
// transformers' AutoTokenizer in the fidelity venv (scripts/fidelity-deps.sh; the loading SGLang and vLLM do),
// add_special_tokens false. Then the file's validation at start, and the counting order in a continuation:
// the tokenizer, else /tokenize, else the estimate.
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../../src/config/env';
import {
  checkTokenizerSetting,
  loadModelTokenizer,
  ModelTokenizerError,
  type TextTokenizer,
  tokenizerFile,
  tokenizersBinding,
} from '../../../src/templates/model-tokenizer';

// Makes require('tokenizers') fail as the binding's own loader does where no build matches the platform.
const NO_BINDING_PRELOAD = `
const Module = require('module');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'tokenizers') throw new Error('Cannot find native binding. npm has a bug related to optional dependencies');
  return load.call(this, request, ...rest);
};
`;

import { forgetDetectedDialects } from '../../../src/upstream/tokenize-dialects';
import { countRecoveredTokens } from '../../../src/upstream/tokenizer';
import { startFakeEngine } from '../../../tools/fake-engine/server';

jest.setTimeout(180_000);

const ROOT = path.resolve(__dirname, '..', '..', '..', '..');
const run = (script: string) =>
  execFileSync('bash', [path.join(ROOT, 'scripts', script)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .pop() as string;
const assets = run('tokenizer-assets.sh');

/** Texts a continuation counts: the project's docs by paragraph, and what tokenizers disagree on most. */
function corpus(): string[] {
  const docs = ['README.md', 'docs/families.md', 'docs/performance.md', 'docs/envoy.md', 'CHANGELOG.md'].map((f) =>
    fs.readFileSync(path.join(ROOT, f), 'utf8'),
  );
  const paragraphs = docs
    .join('\n\n')
    .split(/\n\n+/)
    .filter((p) => p.trim() !== '');
  return [
    ...paragraphs.slice(0, 250),
    '<think>\nThe user asks about continuation. Let me think.\n</think>\n\nHere is the answer.',
    '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    '<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>Done.',
    '天空为什么是蓝色的？这是因为瑞利散射：短波长的蓝光比红光散射得更多。日本語のテキスト。한국어 문장도 있습니다.',
    'Numbers: 1234567890, 3.14159, 2026-12-03T19:00:00Z, 0xDEADBEEF, 1e-9, 100%.',
    'Emoji 👍🏽 🇫🇷 👨‍👩‍👧‍👦 and symbols ∑∫√∞ ≠ ≤ ≥ — “quotes” ‘single’ …',
    'def f(x):\n    return {"a": [1, 2, 3], "b": None}\n\n\n\tindented\ttabs   and   spaces  \n',
    '   leading and trailing spaces   ',
    'ÀÉÎÕÜ ñ ç ß œ æ ø å Ωμέγα Привет мир',
    '\n\n\n',
    'a'.repeat(500),
  ];
}

describe.each(['qwen3', 'gpt-oss'])("%s's tokenizer.json: the engine tokenizer's count for every text", (name) => {
  let tok: TextTokenizer;
  beforeAll(() => {
    tok = loadModelTokenizer(path.join(assets, name));
  });

  test('equal to transformers (AutoTokenizer.encode, add_special_tokens false) on every text', async () => {
    const texts = corpus();
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tok-')), 'texts.json');
    fs.writeFileSync(file, JSON.stringify(texts));
    const py = run('fidelity-deps.sh');
    const expected: number[] = JSON.parse(
      execFileSync(py, [path.join(ROOT, 'test', 'fidelity', 'count_tokens.py'), path.join(assets, name), file], {
        encoding: 'utf8',
        env: { ...process.env, TRANSFORMERS_VERBOSITY: 'error' },
        stdio: ['ignore', 'pipe', 'ignore'],
        maxBuffer: 16 * 1024 * 1024,
      }),
    );
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
    const got = await Promise.all(texts.map((t) => tok.count(t)));
    expect(texts.length).toBeGreaterThan(200);
    const differing = texts
      .map((t, i) => ({ i, text: t.slice(0, 40), got: got[i], expected: expected[i] }))
      .filter((d) => d.got !== d.expected);
    expect(differing).toEqual([]);
    // Special-token text is the one added token it names, as in a prompt.
    expect(await tok.count(name === 'qwen3' ? '<think>' : '<|channel|>')).toBe(1);
    expect(await tok.count('')).toBe(0);
  });
});

describe('TOKENIZER at start: a file the library can load, else one line naming the variable', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tokenizer-setting-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = (TOKENIZER: string) => ({ DOWNSTREAM_URL: 'http://127.0.0.1:1', CONTINUATION_MODEL: 'm', TOKENIZER });

  test('the model directory, or a tokenizer.json named directly', () => {
    const qwen = path.join(assets, 'qwen3');
    expect(tokenizerFile(qwen)).toBe(path.join(qwen, 'tokenizer.json'));
    expect(tokenizerFile(path.join(qwen, 'tokenizer.json'))).toBe(path.join(qwen, 'tokenizer.json'));
    expect(checkTokenizerSetting(qwen)).toBeUndefined();
    expect(loadConfig(env(qwen)).tokenizer).toBe(qwen);
    expect(loadConfig({ DOWNSTREAM_URL: 'http://127.0.0.1:1' }).tokenizer).toBeUndefined();
  });

  test.each([
    ['a path that does not exist', () => path.join(dir, 'nothing-here'), /^config error: TOKENIZER .*nothing-here: ENOENT$/],
    ['a directory without tokenizer.json', () => dir, /^config error: TOKENIZER .* holds no tokenizer\.json$/],
    [
      'a file that opens no JSON object (a GGUF, a YAML file)',
      () => write('model.gguf', 'GGUF\u0003\u0000'),
      /^config error: TOKENIZER .*model\.gguf is not a tokenizer\.json \(not a JSON object\)$/,
    ],
  ])('%s', (_c, setting, message) => {
    const s = setting();
    expect(checkTokenizerSetting(s)).toMatch(message);
    expect(() => loadConfig(env(s))).toThrow(message);
  });

  // Only the file's first bytes are read at config time (a second parse of a 10-30 MB file stayed resident in
  // every process); the library's load finds the rest, before the sidecar serves.
  test.each([
    ['a model type the library does not know', 'unknown-model.json', '{"model": {"type": "NoSuchModel"}}'],
    ['truncated JSON', 'truncated.json', '{"model": '],
    ['JSON that is no tokenizer', 'config.json', '{"architectures": ["X"]}'],
  ])('%s: the config check passes it, the sidecar process exits 2 with a TOKENIZER line before serving', (_c, name, text) => {
    const file = write(name, text);
    expect(checkTokenizerSetting(file)).toBeUndefined(); // what the first bytes can tell
    const r = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'src', 'main.js')], {
      env: { PATH: process.env.PATH, ...env(file), PORT: '0', ADMIN_PORT: '0' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^config error: TOKENIZER .*${name.replace('.', '\\.')} cannot be loaded as a tokenizer`, 'm'));
    expect(r.stdout).not.toContain('SIDECAR listening');
  });

  test("a platform the native binding has no build for: exit 2 with a TOKENIZER line naming the platform, not npm's words", () => {
    const qwen = path.join(assets, 'qwen3');
    const missing = () => {
      throw new Error('Cannot find native binding. npm has a bug related to optional dependencies\n    at ...');
    };
    expect(() => loadModelTokenizer(qwen, () => tokenizersBinding(missing))).toThrow(ModelTokenizerError);
    expect(() => loadModelTokenizer(qwen, () => tokenizersBinding(missing))).toThrow(
      new RegExp(
        `the tokenizers native binding does not load on ${process.platform}-${process.arch} \\(Cannot find native binding\\. npm has a bug related to optional dependencies\\)$`,
      ),
    );
    // The whole process, with the module's loader failing as it does on such a platform.
    const preload = write('no-binding.js', NO_BINDING_PRELOAD);
    const r = spawnSync(process.execPath, ['--require', preload, path.join(ROOT, 'dist', 'src', 'main.js')], {
      env: { PATH: process.env.PATH, ...env(qwen), PORT: '0', ADMIN_PORT: '0' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^config error: TOKENIZER .*qwen3.* cannot be used: the tokenizers native binding does not load on /m);
    expect(r.stdout).not.toContain('SIDECAR listening');
  });

  function write(name: string, text: string): string {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    return f;
  }
});

describe("a continuation's count: the tokenizer first, then /tokenize, then the estimate", () => {
  const payload = { model: 'm', stream: true, messages: [{ role: 'user', content: 'Tell me about continuation.' }] };
  const reasoning = 'The user asks about continuation.';
  const content = ' A continuation is a new generation.';
  const prefix = `<think>\n${reasoning}\n</think>\n\n${content}`;
  let tok: TextTokenizer;
  beforeAll(() => {
    tok = loadModelTokenizer(path.join(assets, 'qwen3'));
  });
  beforeEach(() => forgetDetectedDialects());
  const base = (extra: Record<string, unknown> = {}) => ({
    url: undefined,
    dialect: 'auto' as const,
    rates: { cjk: 1.6, other: 4 },
    prefix,
    prefixIsGenerated: true,
    onFallback: () => undefined,
    ...extra,
  });

  test("in process: the generated text's tokens, the prompt through the served template when the design has it", async () => {
    const promptText = '<|im_start|>user\nTell me about continuation.<|im_end|>\n<|im_start|>assistant\n';
    const c = await countRecoveredTokens(payload, reasoning, content, base({ tokenizer: tok, promptText }));
    expect(c).toMatchObject({
      method: 'tokenizer',
      accounting: { method: 'tokenizer', dialect: null, prompt: 'template' },
      promptTokens: await tok.count(promptText),
      totalRecovered: await tok.count(prefix),
      contentTokens: await tok.count(content),
      prefixTokens: await tok.count(prefix),
    });
    expect(c.reasoningTokens + c.contentTokens).toBe(c.totalRecovered);
    // Without the template's text: leg 2's prompt_tokens minus the counted prefix (src/recovery/usage.ts).
    const noTemplate = await countRecoveredTokens(payload, reasoning, content, base({ tokenizer: tok }));
    expect(noTemplate.accounting).toEqual({ method: 'tokenizer', dialect: null, prompt: 'leg2-minus-prefix' });
  });

  test('a tokenizer that fails: /tokenize counts, then the estimate; `tokenizer-failed` said and logged', async () => {
    const broken: TextTokenizer = { origin: 'x', count: () => Promise.reject(new Error('boom')) };
    const engine = await startFakeEngine({ name: 'tok', dialect: 'sglang', tokenIntervalMs: 0 });
    try {
      const codes: string[] = [];
      const viaUrl = await countRecoveredTokens(
        payload,
        reasoning,
        content,
        base({ tokenizer: broken, url: `${engine.url}/tokenize`, onFallback: (_d: string, c: string) => codes.push(c) }),
      );
      expect(viaUrl.accounting).toMatchObject({ method: 'tokenize', dialect: 'sglang', fallback: 'tokenizer-failed' });
      const estimated = await countRecoveredTokens(payload, reasoning, content, base({ tokenizer: broken }));
      expect(estimated.accounting).toEqual({ method: 'estimate', dialect: null, prompt: 'estimate', fallback: 'tokenizer-failed' });
      expect(codes).toEqual(['tokenizer-failed']);
    } finally {
      await engine.close();
    }
  });
});
