// CHAT_TEMPLATE at run time: a file or model directory read once at start (an unreadable or unparsable one stops
// the sidecar, naming the variable), or `auto`: the template the engine serves, where the engine can tell.
//   - llama.cpp: llama-server answers its template at GET /props (chat_template, bos_token, eos_token), through
//     DOWNSTREAM_URL. Asked at start and, until it answers, again with a bounded backoff (retryMs doubling to
//     maxRetryMs; the engine may take minutes to load its model); logged when it first answers. Until then
//     continuations follow the family table or the generic guess, each checked by the engine's /apply-template.
//   - vLLM answers no template (no /props): it renders through its own at /tokenize, which
//     src/templates/engine-check.ts asks on every continuation instead; nothing is polled, and that check is the
//     only one (a continuation it does not confirm ends explicitly, src/recovery/leg2-checks.ts).
//   - SGLang answers none and checks nothing: `auto` is a configuration error (src/config/env.ts).

import { request } from 'undici';
import { ERROR_CODES, GatewayError } from '../errors';
import type { Engine } from '../families/types';
import type { Logger } from '../obs/logger';
import { TemplateRenderError } from './renderer';
import { type ServedTemplate, serveTemplates } from './served';
import { readTemplateFiles, TemplateSourceError } from './source';

export const TEMPLATE_AUTO = 'auto';

export const isTemplateAuto = (setting: string | undefined): boolean => setting?.trim().toLowerCase() === TEMPLATE_AUTO;

/** The configuration error for `auto` on SGLang (src/config/env.ts reports it with the others). */
export const AUTO_ON_SGLANG =
  'config error: CHAT_TEMPLATE=auto cannot be used with CONTINUATION_ENGINE=sglang: SGLang does not tell which template it serves, nor check a prompt against it; set CHAT_TEMPLATE to the model directory the engine loads (or its tokenizer_config.json / chat_template.jinja), mounted into the sidecar';

/** A CHAT_TEMPLATE that cannot be used: the message names the variable and what is wrong, never a template's text. */
export class ChatTemplateConfigError extends GatewayError {
  readonly code = ERROR_CODES.chatTemplateConfig;
}

export interface TemplateProvider {
  /** The template in effect; undefined: none configured, or `auto` without an answer yet. */
  served(): ServedTemplate | undefined;
  stop(): void;
}

/** CHAT_TEMPLATE=<file or directory>: read and compiled now. */
export function templateFromFiles(location: string): ServedTemplate {
  try {
    const files = readTemplateFiles(location);
    return serveTemplates(files.templates, files.special, files.origin);
  } catch (e) {
    if (e instanceof TemplateSourceError || e instanceof TemplateRenderError)
      throw new ChatTemplateConfigError(`config error: CHAT_TEMPLATE ${e.message}`);
    throw e;
  }
}

/** llama-server's /props answer, as far as a template goes. */
export function templateFromProps(props: unknown): ServedTemplate | undefined {
  const p = props as { chat_template?: unknown; bos_token?: unknown; eos_token?: unknown } | null;
  if (typeof p?.chat_template !== 'string' || p.chat_template.trim() === '') return undefined;
  const special: Record<string, string> = {};
  if (typeof p.bos_token === 'string') special.bos_token = p.bos_token;
  if (typeof p.eos_token === 'string') special.eos_token = p.eos_token;
  return serveTemplates({ default: p.chat_template }, special, 'the engine (GET /props)');
}

const fixed = (s: ServedTemplate | undefined): TemplateProvider => ({ served: () => s, stop: () => {} });

interface PollOptions {
  baseUrl: string;
  log: Logger;
  /** The first retry's delay; each next one doubles, up to maxRetryMs. */
  retryMs: number;
  maxRetryMs: number;
  timeoutMs: number;
}

/** llama-server's template, asked at GET /props until it answers one. */
class EngineTemplate implements TemplateProvider {
  private current: ServedTemplate | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private attempts = 0;
  private readonly aborts = new AbortController();

  constructor(private readonly o: PollOptions) {}

  served(): ServedTemplate | undefined {
    return this.current;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.aborts.abort();
  }

  /** The delay before attempt n + 1 (n >= 1): retryMs x 2^(n-1), at most maxRetryMs. */
  static delayAfter(n: number, o: Pick<PollOptions, 'retryMs' | 'maxRetryMs'>): number {
    return Math.min(o.maxRetryMs, o.retryMs * 2 ** Math.min(n - 1, 30));
  }

  private async props(): Promise<unknown> {
    const url = `${this.o.baseUrl.replace(/\/+$/, '')}/props`;
    try {
      const r = await request(url, {
        method: 'GET',
        headersTimeout: this.o.timeoutMs,
        bodyTimeout: this.o.timeoutMs,
        signal: this.aborts.signal,
      });
      const text = await r.body.text();
      return r.statusCode === 200 ? JSON.parse(text) : undefined;
    } catch {
      return undefined; // not answering yet: tried again
    }
  }

  async attempt(): Promise<void> {
    if (this.stopped) return;
    this.attempts++;
    const props = await this.props();
    if (this.stopped) return;
    try {
      this.current = templateFromProps(props);
    } catch (e) {
      this.o.log.warn(
        { decision: 'TEMPLATE_UNUSABLE', origin: 'engine', error_code: (e as { code?: string }).code },
        'CHAT_TEMPLATE=auto: the engine\u2019s template cannot be rendered here; continuations go without it (each one checked by its /apply-template)',
      );
      return;
    }
    const c = this.current;
    if (c) {
      this.o.log.info(
        { decision: 'TEMPLATE_LOADED', origin: c.origin, sha256: c.sha256, attempts: this.attempts },
        'CHAT_TEMPLATE=auto: llama-server answered its template; continuations are designed from it (or the family entry proven against it) and checked by its /apply-template',
      );
      return;
    }
    if (this.attempts === 1)
      this.o.log.info(
        { engine: 'llamacpp', retry_max_seconds: this.o.maxRetryMs / 1000 },
        'CHAT_TEMPLATE=auto: llama-server\u2019s GET /props has no template yet; asked again with a backoff until it has',
      );
    this.timer = setTimeout(() => void this.attempt(), EngineTemplate.delayAfter(this.attempts, this.o));
    this.timer.unref();
  }
}

export interface TemplateProviderOptions {
  readonly engine: Engine;
  readonly baseUrl: string;
  readonly log: Logger;
  /** `auto` on llama.cpp: the first retry after (default 1 s), doubling up to maxRetryMs (default 30 s). */
  readonly retryMs?: number;
  readonly maxRetryMs?: number;
  /** Each GET /props (default 2 s). */
  readonly timeoutMs?: number;
}

/** The provider for a CHAT_TEMPLATE value (undefined = none). Throws ChatTemplateConfigError for a bad file. */
export async function templateProvider(setting: string | undefined, o: TemplateProviderOptions): Promise<TemplateProvider> {
  if (setting === undefined) return fixed(undefined);
  if (!isTemplateAuto(setting)) {
    const served = templateFromFiles(setting);
    logLoaded(o.log, served);
    return fixed(served);
  }
  if (o.engine === 'sglang') throw new ChatTemplateConfigError(AUTO_ON_SGLANG);
  // vLLM serves no template to read: its chat /tokenize is asked on every continuation (the only check).
  if (o.engine === 'vllm') return fixed(undefined);
  const engine = new EngineTemplate({
    baseUrl: o.baseUrl,
    log: o.log,
    retryMs: o.retryMs ?? 1000,
    maxRetryMs: Math.max(o.maxRetryMs ?? 30_000, o.retryMs ?? 1000),
    timeoutMs: o.timeoutMs ?? 2000,
  });
  await engine.attempt();
  return engine;
}

/** For tests: the backoff's delays. */
export const propsRetryDelay = EngineTemplate.delayAfter;

/**
 * TEMPLATE_LOADED for a file. A template that prints a special token no file beside it names (a bare `.jinja`)
 * renders it empty where the engine prints its token: every continuation an engine check compares then ends
 * explicitly, so that is a warning naming the tokens, not the template's text.
 */
function logLoaded(log: Logger, served: ServedTemplate): void {
  const fields = { decision: 'TEMPLATE_LOADED', origin: served.origin, sha256: served.sha256 };
  if (served.missingSpecial.length === 0) return void log.info(fields, 'chat template read');
  log.warn(
    { ...fields, missing_special_tokens: served.missingSpecial },
    'chat template read, but it prints special tokens no file beside it names: mount it with its tokenizer_config.json (or the model directory), else continuations an engine check compares end explicitly',
  );
}
