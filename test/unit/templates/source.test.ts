// CHAT_TEMPLATE's files (src/templates/source.ts) and what the engine's /props answers (provider.ts): the order
// transformers resolves a model directory's templates in, the special tokens beside them, and one line an
// operator can act on for each mistake.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '../../../src/config/env';
import { templateFromFiles, templateFromProps } from '../../../src/templates/provider';
import { templateForRequest } from '../../../src/templates/served';
import { readTemplateFiles, TemplateSourceError } from '../../../src/templates/source';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-template-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const write = (name: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
  fs.writeFileSync(path.join(dir, name), text);
};
const CONFIG = (chatTemplate: unknown) =>
  JSON.stringify({ bos_token: { content: '<s>', lstrip: false }, eos_token: '</s>', chat_template: chatTemplate });

describe('a model directory', () => {
  it('prefers chat_template.jinja (and additional_chat_templates/) over tokenizer_config.json, with its special tokens', () => {
    write('tokenizer_config.json', CONFIG('from the config'));
    write('chat_template.jinja', 'from the jinja file');
    write('additional_chat_templates/tool_use.jinja', 'tools');
    const f = readTemplateFiles(dir);
    expect(f.templates).toEqual({ default: 'from the jinja file', tool_use: 'tools' });
    expect(f.special).toEqual({ bos_token: '<s>', eos_token: '</s>' });
    expect(f.origin).toBe(path.join(dir, 'chat_template.jinja'));
  });

  it('reads tokenizer_config.json: a string, or named templates', () => {
    write(
      'tokenizer_config.json',
      CONFIG([
        { name: 'default', template: 'd' },
        { name: 'tool_use', template: 't' },
      ]),
    );
    expect(readTemplateFiles(dir).templates).toEqual({ default: 'd', tool_use: 't' });
  });

  it('falls back to the processor file chat_template.json, and special_tokens_map.json gives tokens too', () => {
    write('tokenizer_config.json', JSON.stringify({ model_max_length: 10 }));
    write('special_tokens_map.json', JSON.stringify({ bos_token: '<bos>' }));
    write('chat_template.json', JSON.stringify({ chat_template: 'processor' }));
    const f = readTemplateFiles(dir);
    expect(f.templates).toEqual({ default: 'processor' });
    expect(f.special).toEqual({ bos_token: '<bos>' });
  });

  it('without any template: an error naming the files looked for', () => {
    write('config.json', '{}');
    expect(() => readTemplateFiles(dir)).toThrow(
      /holds no chat template \(chat_template\.jinja, tokenizer_config\.json or chat_template\.json\)/,
    );
  });
});

describe('a single file', () => {
  it('a .jinja as it is, special tokens from the tokenizer_config.json beside it', () => {
    write('tokenizer_config.json', CONFIG('unused'));
    write('t.jinja', '{{ bos_token }}x');
    expect(readTemplateFiles(path.join(dir, 't.jinja'))).toMatchObject({
      templates: { default: '{{ bos_token }}x' },
      special: { bos_token: '<s>' },
    });
  });

  it('a tokenizer_config.json', () => {
    write('tokenizer_config.json', CONFIG('{{ messages[0].content }}'));
    expect(readTemplateFiles(path.join(dir, 'tokenizer_config.json')).templates).toEqual({ default: '{{ messages[0].content }}' });
  });

  it('mistakes: a missing file, JSON that is not an object, a config without a template, malformed named templates', () => {
    expect(() => readTemplateFiles(path.join(dir, 'nope.jinja'))).toThrow(TemplateSourceError);
    write('a.json', '[1]');
    expect(() => readTemplateFiles(path.join(dir, 'a.json'))).toThrow(/is not a JSON object/);
    write('b.json', '{}');
    expect(() => readTemplateFiles(path.join(dir, 'b.json'))).toThrow(/has no chat_template/);
    write('c.json', JSON.stringify({ chat_template: [{ name: 'x' }] }));
    expect(() => readTemplateFiles(path.join(dir, 'c.json'))).toThrow(/need a name and a template/);
  });
});

describe('compiled for use', () => {
  it('a template that does not parse stops the sidecar at start, naming CHAT_TEMPLATE', () => {
    write('bad.jinja', '{% if %}');
    expect(() => templateFromFiles(path.join(dir, 'bad.jinja'))).toThrow(/^config error: CHAT_TEMPLATE the template could not be parsed/);
    const env = { DOWNSTREAM_URL: 'http://127.0.0.1:1', CONTINUATION_MODEL: 'm', CHAT_TEMPLATE: path.join(dir, 'bad.jinja') };
    expect(() => loadConfig(env)).toThrow(/CHAT_TEMPLATE the template could not be parsed/);
  });

  it('CHAT_TEMPLATE needs CONTINUATION_MODEL', () => {
    write('ok.jinja', 'x');
    expect(() => loadConfig({ DOWNSTREAM_URL: 'http://127.0.0.1:1', CHAT_TEMPLATE: path.join(dir, 'ok.jinja') })).toThrow(
      /CHAT_TEMPLATE needs CONTINUATION_MODEL/,
    );
    const auto = { DOWNSTREAM_URL: 'http://127.0.0.1:1', CONTINUATION_MODEL: 'm', CHAT_TEMPLATE: 'auto' };
    expect(loadConfig({ ...auto, CONTINUATION_ENGINE: 'llamacpp' }).chatTemplate).toBe('auto');
    expect(loadConfig({ ...auto, CONTINUATION_ENGINE: 'vllm' }).chatTemplate).toBe('auto');
  });

  it('CHAT_TEMPLATE=auto on SGLang (the default engine) stops the sidecar at start: SGLang cannot tell its template', () => {
    const env = { DOWNSTREAM_URL: 'http://127.0.0.1:1', CONTINUATION_MODEL: 'm', CHAT_TEMPLATE: 'AUTO' };
    for (const engine of [{}, { CONTINUATION_ENGINE: 'sglang' }]) {
      let err: unknown;
      try {
        loadConfig({ ...env, ...engine });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([
        expect.stringMatching(/^config error: CHAT_TEMPLATE=auto cannot be used with CONTINUATION_ENGINE=sglang: .*model directory/),
      ]);
    }
    // One line per bad variable, with the other checks of that stage (the files), fastify-style.
    const both = () => loadConfig({ ...env, TOKENIZER: path.join(dir, 'nope') });
    expect(both).toThrow(/^config error: CHAT_TEMPLATE=auto .*\nconfig error: TOKENIZER /);
  });

  it('a request with tools renders with tool_use where the model has one, else the default', () => {
    write(
      'tokenizer_config.json',
      CONFIG([
        { name: 'default', template: 'd' },
        { name: 'tool_use', template: 't' },
      ]),
    );
    const served = templateFromFiles(dir);
    expect(templateForRequest(served, { tools: [{ type: 'function' }] })?.text).toBe('t');
    expect(templateForRequest(served, {})?.text).toBe('d');
    expect(served.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("llama-server's /props: its template and special tokens, or nothing", () => {
    const s = templateFromProps({ chat_template: '{{ bos_token }}', bos_token: '<s>', eos_token: '</s>', model_path: '/m' });
    expect(s?.special).toEqual({ bos_token: '<s>', eos_token: '</s>' });
    expect(s?.origin).toBe('the engine (GET /props)');
    expect(templateFromProps({ chat_template: '' })).toBeUndefined();
    expect(templateFromProps(null)).toBeUndefined();
  });
});
