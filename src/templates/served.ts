// The chat template the engine serves, once loaded (src/templates/source.ts reads it from files, the engine's
// /props answers it for llama-server): compiled once, with the special tokens the engine renders it with.
import { createHash } from 'node:crypto';
import type { SpecialTokens } from './engine-prompt';
import { ChatTemplate } from './renderer';

export interface ServedTemplate {
  /** Compiled templates by name (`default`, and `tool_use` where the model has one). */
  readonly templates: ReadonlyMap<string, ChatTemplate>;
  readonly special: SpecialTokens;
  /** Where it came from, for the log: a file name, or the engine's /props. */
  readonly origin: string;
  /** sha256 of the default template's text: the family table names the templates its entries were proven against. */
  readonly sha256: string | undefined;
  /** Special tokens the templates print that no file gave a value (a `.jinja` mounted without its tokenizer_config.json). */
  readonly missingSpecial: readonly string[];
}

const SPECIAL_NAMES = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;

export function templateSha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Compiles every template; throws TemplateRenderError (the template's own syntax error) when one cannot be parsed. */
export function serveTemplates(texts: Readonly<Record<string, string>>, special: SpecialTokens, origin: string): ServedTemplate {
  const templates = new Map(Object.entries(texts).map(([name, text]) => [name, new ChatTemplate(text)] as const));
  const def = texts.default;
  return Object.freeze({
    templates,
    special: Object.freeze({ ...special }),
    origin,
    sha256: def === undefined ? undefined : templateSha256(def),
    missingSpecial: Object.freeze(
      SPECIAL_NAMES.filter((n) => special[n] === undefined && Object.values(texts).some((t) => new RegExp(`\\b${n}\\b`).test(t))),
    ),
  });
}

/** The template a request renders with (transformers get_chat_template): `tool_use` with tools, if there is one. */
export function templateForRequest(s: ServedTemplate, body: { tools?: unknown }): ChatTemplate | undefined {
  const hasTools = Array.isArray(body.tools) && body.tools.length > 0;
  return (hasTools ? s.templates.get('tool_use') : undefined) ?? s.templates.get('default');
}
