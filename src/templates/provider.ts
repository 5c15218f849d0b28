// CHAT_TEMPLATE at run time: a file or model directory read once at start (an unreadable or unparsable one stops
// the sidecar, naming the variable), or `auto`: what the engine says it serves, through DOWNSTREAM_URL. Of the
// engines only llama-server answers its template (GET /props: chat_template, bos_token, eos_token); SGLang
// answers none, and vLLM renders through its own at /tokenize, which src/templates/engine-check.ts asks on
// every continuation instead. Until `auto` has an answer, continuations go as without a template.

import { request } from 'undici';
import { ERROR_CODES, GatewayError } from '../errors';
import type { Logger } from '../obs/logger';
import { TemplateRenderError } from './renderer';
import { type ServedTemplate, serveTemplates } from './served';
import { readTemplateFiles, TemplateSourceError } from './source';

export const TEMPLATE_AUTO = 'auto';

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

class EngineTemplate implements TemplateProvider {
  private current: ServedTemplate | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly o: { baseUrl: string; log: Logger; retryMs: number; timeoutMs: number }) {}

  served(): ServedTemplate | undefined {
    return this.current;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  async attempt(): Promise<void> {
    if (this.stopped) return;
    const url = `${this.o.baseUrl.replace(/\/+$/, '')}/props`;
    let props: unknown;
    try {
      const r = await request(url, { method: 'GET', headersTimeout: this.o.timeoutMs, bodyTimeout: this.o.timeoutMs });
      const text = await r.body.text();
      if (r.statusCode === 200) props = JSON.parse(text);
    } catch {
      props = undefined; // not answering yet: tried again below
    }
    try {
      this.current = templateFromProps(props);
    } catch (e) {
      this.o.log.warn(
        { decision: 'TEMPLATE_UNUSABLE', origin: 'engine', error_code: (e as { code?: string }).code },
        'CHAT_TEMPLATE=auto: the engine\u2019s template cannot be rendered here; continuations go without it',
      );
      return;
    }
    if (this.current) {
      this.o.log.info({ decision: 'TEMPLATE_LOADED', origin: this.current.origin, sha256: this.current.sha256 }, 'chat template read');
      return;
    }
    this.timer = setTimeout(() => void this.attempt(), this.o.retryMs);
    this.timer.unref();
  }
}

/** The provider for a CHAT_TEMPLATE value (undefined = none). Throws ChatTemplateConfigError for a bad file. */
export async function templateProvider(
  setting: string | undefined,
  o: { baseUrl: string; log: Logger; retryMs?: number; timeoutMs?: number },
): Promise<TemplateProvider> {
  if (setting === undefined) return fixed(undefined);
  if (setting.trim().toLowerCase() !== TEMPLATE_AUTO) {
    const served = templateFromFiles(setting);
    o.log.info({ decision: 'TEMPLATE_LOADED', origin: served.origin, sha256: served.sha256 }, 'chat template read');
    return fixed(served);
  }
  const engine = new EngineTemplate({ baseUrl: o.baseUrl, log: o.log, retryMs: o.retryMs ?? 5000, timeoutMs: o.timeoutMs ?? 2000 });
  await engine.attempt();
  return engine;
}
