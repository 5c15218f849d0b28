// CHAT_TEMPLATE: where the template the engine serves is read from. The files an engine loads from the model
// directory, in the order transformers 5.19 resolves them (tokenization_utils_base.py L1784-1800, L3226-3263;
// utils/hub.py L67-69) and vLLM falls back to the processor's (chat_template.json):
//   chat_template.jinja (and additional_chat_templates/<name>.jinja) > tokenizer_config.json "chat_template"
//   (a string, or a list of {name, template}) > chat_template.json {"chat_template": ...};
// or a single file: a .jinja (the template as such), a tokenizer_config.json, a chat_template.json. The special
// tokens the template reads (bos_token, eos_token, ...) come from tokenizer_config.json and
// special_tokens_map.json beside it. Named templates: `tool_use` for a request with tools, else `default`
// (transformers get_chat_template).

import * as fs from 'node:fs';
import * as path from 'node:path';
import { ERROR_CODES, GatewayError } from '../errors';

export interface TemplateFiles {
  /** name -> template text; `default` is the one without tools. */
  readonly templates: Readonly<Record<string, string>>;
  readonly special: Readonly<Record<string, string>>;
  /** The file the default template was read from, for the log. */
  readonly origin: string;
}

export class TemplateSourceError extends GatewayError {
  readonly code = ERROR_CODES.templateSource;
}

type Reader = (file: string) => string | undefined;

const fsReader: Reader = (file) => {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new TemplateSourceError(`${file}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
};

function json(file: string, text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new TemplateSourceError(`${file} is not a JSON object`);
}

/** tokenizer_config.json's chat_template: a string, or [{name, template}, ...]. */
function configTemplates(file: string, v: unknown): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return { default: v };
  if (Array.isArray(v)) {
    const out: Record<string, string> = {};
    for (const t of v) {
      const e = t as { name?: unknown; template?: unknown };
      if (typeof e?.name !== 'string' || typeof e.template !== 'string')
        throw new TemplateSourceError(`${file}: chat_template entries need a name and a template`);
      out[e.name] = e.template;
    }
    return out;
  }
  throw new TemplateSourceError(`${file}: chat_template is neither a string nor a list of named templates`);
}

/** A special token as tokenizer configs write it: a string, or an AddedToken {content}. */
function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  const c = (v as { content?: unknown } | null)?.content;
  return typeof c === 'string' ? c : undefined;
}

const SPECIAL_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

function specialTokens(dir: string, read: Reader): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ['special_tokens_map.json', 'tokenizer_config.json']) {
    const text = read(path.join(dir, name));
    if (text === undefined) continue;
    const cfg = json(path.join(dir, name), text);
    for (const k of SPECIAL_KEYS) {
      const t = tokenText(cfg[k]);
      if (t !== undefined) out[k] = t;
    }
  }
  return out;
}

function fromDirectory(dir: string, read: Reader, listDir: (d: string) => string[]): TemplateFiles {
  const special = specialTokens(dir, read);
  const jinja = read(path.join(dir, 'chat_template.jinja'));
  if (jinja !== undefined) {
    const templates: Record<string, string> = { default: jinja };
    const extra = path.join(dir, 'additional_chat_templates');
    for (const f of listDir(extra).filter((n) => n.endsWith('.jinja')))
      templates[f.slice(0, -'.jinja'.length)] = read(path.join(extra, f)) ?? '';
    return { templates, special, origin: path.join(dir, 'chat_template.jinja') };
  }
  const cfgFile = path.join(dir, 'tokenizer_config.json');
  const cfgText = read(cfgFile);
  const fromCfg = cfgText === undefined ? undefined : configTemplates(cfgFile, json(cfgFile, cfgText).chat_template);
  if (fromCfg) return { templates: fromCfg, special, origin: cfgFile };
  const procFile = path.join(dir, 'chat_template.json');
  const procText = read(procFile);
  const fromProc = procText === undefined ? undefined : configTemplates(procFile, json(procFile, procText).chat_template);
  if (fromProc) return { templates: fromProc, special, origin: procFile };
  throw new TemplateSourceError(`${dir} holds no chat template (chat_template.jinja, tokenizer_config.json or chat_template.json)`);
}

/** Reads CHAT_TEMPLATE's file or directory. Throws TemplateSourceError with a line an operator can act on. */
export function readTemplateFiles(
  location: string,
  io: { read: Reader; isDirectory: (p: string) => boolean; listDir: (d: string) => string[] } = {
    read: fsReader,
    isDirectory: (p) => fs.existsSync(p) && fs.statSync(p).isDirectory(),
    listDir: (d) => (fs.existsSync(d) ? fs.readdirSync(d) : []),
  },
): TemplateFiles {
  if (io.isDirectory(location)) return fromDirectory(location, io.read, io.listDir);
  const text = io.read(location);
  if (text === undefined) throw new TemplateSourceError(`${location} does not exist`);
  const base = path.basename(location);
  const special = specialTokens(path.dirname(location), io.read);
  if (base.endsWith('.json')) {
    const templates = configTemplates(location, json(location, text).chat_template);
    if (!templates) throw new TemplateSourceError(`${location} has no chat_template`);
    return { templates, special, origin: location };
  }
  return { templates: { default: text }, special, origin: location };
}

/** The template a request renders with: `tool_use` when it offers tools and the model has one, else `default`. */
export function templateFor(files: Pick<TemplateFiles, 'templates'>, hasTools: boolean): string | undefined {
  return (hasTools ? files.templates.tool_use : undefined) ?? files.templates.default;
}
