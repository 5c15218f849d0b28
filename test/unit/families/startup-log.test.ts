// What the sidecar says at start about its continuations (src/families/startup-log.ts logFamily): where leg 2's
// format comes from and what checks it, per engine, with the template the provider has at start. The decisions
// are the README's (src/obs/decisions.ts); the warning for a name no family knows stays while no template text is
// known.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '../../../src/config/env';
import { type FamilyLogConfig, logFamily } from '../../../src/families/startup-log';
import { createLogger } from '../../../src/obs/logger';
import { serveTemplates } from '../../../src/templates/served';
import { provisionAssets } from '../../fidelity/harness-client';
import { captureLogs } from '../../support/log-capture';

const templates = provisionAssets().templates;
const qwen3 = serveTemplates(
  { default: fs.readFileSync(path.join(templates, 'Qwen-Qwen3-0.6B.jinja'), 'utf8') },
  {},
  'tokenizer_config.json',
);

/** The records logFamily writes for this configuration (and the template the provider has at start). */
function records(cfg: FamilyLogConfig, served?: Parameters<typeof logFamily>[2]): any[] {
  const capture = captureLogs();
  logFamily(createLogger('info', capture.sink), cfg, served);
  return capture.logs.map(({ decision, level, msg, check, family }) => ({ decision, level, msg, check, family }));
}
const decisions = (r: any[]) => r.map((x) => x.decision);

describe('logFamily', () => {
  test('no template and a name no family knows: FAMILY_UNKNOWN’s warning, and no check', () => {
    const r = records({ continuationModel: 'acme/house-reasoner', engine: 'vllm' });
    expect(decisions(r)).toEqual(['CONTINUATION_UNCHECKED', 'FAMILY_UNKNOWN']);
    expect(r[1]).toMatchObject({ level: 'warn', family: 'generic', check: 'none' });
    expect(r[1].msg).toMatch(/generic <think> format, which no template test backs/);
  });

  test('FAMILY_UNKNOWN names CONTINUATION_UNVERIFIED and what its value does', () => {
    const allow = records({ continuationModel: 'deepseek-ai/DeepSeek-R1', engine: 'sglang' });
    expect(decisions(allow)).toEqual(['CONTINUATION_UNCHECKED', 'FAMILY_UNKNOWN']);
    expect(allow[1].msg).toMatch(/labelled unverified \(CONTINUATION_UNVERIFIED=allow; set CONTINUATION_UNVERIFIED=refuse/);
    const refuse = records({ continuationModel: 'deepseek-ai/DeepSeek-R1', engine: 'sglang', continuationUnverified: 'refuse' });
    expect(refuse[1]).toMatchObject({ decision: 'FAMILY_UNKNOWN', level: 'warn', family: 'generic' });
    expect(refuse[1].msg).toMatch(/has shown reasoning ends explicitly \(continuation-unverified, CONTINUATION_UNVERIFIED=refuse\)/);
    expect(refuse[1].msg).not.toMatch(/which no template test backs/);
  });

  test.each([
    ['sglang', 'template', /rendered from CHAT_TEMPLATE and verified against it/],
    ['vllm', 'template+engine', /verified against it, then checked by vLLM's chat \/tokenize/],
    ['llamacpp', 'engine', /checked by llama-server's \/apply-template .*the only check.*ends explicitly \(continuation-unverified\)/],
  ] as const)('a template file and a name no family knows, on %s: FAMILY_TEMPLATE_PATH, checked by %s', (engine, check, how) => {
    const r = records({ continuationModel: 'acme/house-reasoner', engine, chatTemplate: '/models/house' }, qwen3);
    expect(decisions(r)).toEqual(['FAMILY_TEMPLATE_PATH']);
    expect(r[0]).toMatchObject({ level: 'info', check });
    expect(r[0].msg).toMatch(/^no family entry names this model: continuations are designed from CHAT_TEMPLATE's template/);
    expect(r[0].msg).toMatch(how);
  });

  test('a template file whose sha256 the named entry was proven against: the entry, verified; another template: the template path', () => {
    const proven = records({ continuationModel: 'Qwen/Qwen3-32B', engine: 'sglang', chatTemplate: '/models/qwen3' }, qwen3);
    expect(proven).toEqual([expect.objectContaining({ decision: 'FAMILY', family: 'qwen3', check: 'template' })]);
    const other = serveTemplates({ default: `${qwen3.templates.get('default')?.text} ` }, {}, 'edited.jinja');
    const edited = records({ continuationModel: 'Qwen/Qwen3-32B', engine: 'sglang', chatTemplate: '/models/edited.jinja' }, other);
    expect(edited).toEqual([expect.objectContaining({ decision: 'FAMILY_TEMPLATE_PATH' })]);
    expect(edited[0].msg).toMatch(/^qwen3's entry was not proven against this template/);
  });

  test('auto on vLLM: no template read, the engine’s check the only one; an unknown name keeps FAMILY_UNKNOWN’s warning', () => {
    const unknown = records({ continuationModel: 'acme/house-reasoner', engine: 'vllm', chatTemplate: 'auto' });
    expect(decisions(unknown)).toEqual(['FAMILY_UNKNOWN']);
    expect(unknown[0]).toMatchObject({ level: 'warn', check: 'engine' });
    expect(unknown[0].msg).toMatch(/no template text is known: continuations use the generic <think> format/);
    expect(unknown[0].msg).toMatch(
      /CHAT_TEMPLATE=auto on vLLM: no template is read .*checked by vLLM's chat \/tokenize .*the only check: a continuation it does not confirm in time \(TOKENIZE_TIMEOUT_MS\) ends explicitly \(continuation-unverified\)/,
    );
    expect(unknown[0].msg).not.toMatch(/designed from CHAT_TEMPLATE/);
    const named = records({ continuationModel: 'Qwen/Qwen3-32B', engine: 'vllm', chatTemplate: 'auto' });
    expect(named).toEqual([expect.objectContaining({ decision: 'FAMILY', family: 'qwen3', check: 'engine' })]);
    expect(named[0].msg).toMatch(/the only check/);
  });

  test('auto on llama.cpp: the template from GET /props once it answers, each leg 2 checked by /apply-template', () => {
    const waiting = records({ continuationModel: 'acme/house-reasoner', engine: 'llamacpp', chatTemplate: 'auto' });
    expect(decisions(waiting)).toEqual(['FAMILY_UNKNOWN']);
    expect(waiting[0]).toMatchObject({ level: 'warn', check: 'engine' });
    expect(waiting[0].msg).toMatch(
      /read from llama-server's GET \/props once it answers .*checked by its \/apply-template, the only check/,
    );
    // /props answered before the sidecar listened: the template path, said so.
    const answered = records({ continuationModel: 'acme/house-reasoner', engine: 'llamacpp', chatTemplate: 'auto' }, qwen3);
    expect(decisions(answered)).toEqual(['FAMILY_TEMPLATE_PATH']);
    expect(answered[0]).toMatchObject({ level: 'info', check: 'engine' });
  });

  test('auto on SGLang: refused at start, naming the variable; no family line is ever written for it', () => {
    const env = {
      DOWNSTREAM_URL: 'http://127.0.0.1:1',
      CONTINUATION_MODEL: 'acme/house-reasoner',
      CHAT_TEMPLATE: 'auto',
      CONTINUATION_ENGINE: 'sglang',
    };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/^config error: CHAT_TEMPLATE=auto cannot be used with CONTINUATION_ENGINE=sglang/);
  });

  test('unset, and CONTINUATION_MODEL=auto, as before', () => {
    expect(decisions(records({ continuationModel: undefined, engine: 'sglang' }))).toEqual(['FAMILY_UNSET']);
    expect(decisions(records({ continuationModel: 'auto', engine: 'vllm', chatTemplate: 'auto' }))).toEqual(['FAMILY_AUTO']);
    expect(decisions(records({ continuationModel: 'auto', engine: 'sglang' }))).toEqual(['CONTINUATION_UNCHECKED', 'FAMILY_AUTO']);
  });
});
