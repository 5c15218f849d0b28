// CONTINUATION_MODEL=auto: the family read from what the engine says it serves, through DOWNSTREAM_URL (Envoy's
// egress, so the router tier answers as it does for chat). What each engine exposes (none exposes its template
// over the OpenAI API; the model's name or path is what there is):
//   vLLM        GET /v1/models        data[].root: the path or hub id the weights were loaded from; id: the served name
//   SGLang      GET /v1/models        data[].id (the served name, by default the model path); GET /get_model_info: model_path
//   llama.cpp   GET /v1/models        data[].id (the alias or the file); GET /props: model_path (and the chat template)
// Until a family is known, requests are passed through (reason continuation-model-undetected): an undetected
// model is never continued with a guessed format. Retried every `retryMs` while nothing answers; when the
// engine answers with names no family knows, one warning lists them and no continuation is made.
import { request } from 'undici';
import type { Logger } from '../obs/logger';
import { knownFamilies, selectFamily } from './select';

export const AUTO = 'auto';
export const MODEL_UNDETECTED = 'continuation-model-undetected';

/** The names an engine's answers give for the model it serves, most specific first. */
export function servedNames(answers: { models?: unknown; modelInfo?: unknown; props?: unknown }): string[] {
  const out: string[] = [];
  const push = (v: unknown) => {
    if (typeof v === 'string' && v.trim() && !out.includes(v)) out.push(v);
  };
  const data = (answers.models as { data?: unknown } | undefined)?.data;
  if (Array.isArray(data)) for (const m of data) push((m as { root?: unknown })?.root);
  push((answers.modelInfo as { model_path?: unknown } | undefined)?.model_path);
  push((answers.props as { model_path?: unknown } | undefined)?.model_path);
  if (Array.isArray(data)) for (const m of data) push((m as { id?: unknown })?.id);
  return out;
}

/** The first served name a family knows (`generic` is never detected: it is no family, only a guess). */
export function detectFamilyName(names: readonly string[]): string | undefined {
  return names.find((n) => {
    const c = selectFamily(n);
    return c.known && c.family.name !== 'generic';
  });
}

async function getJson(url: string, timeoutMs: number): Promise<unknown> {
  const r = await request(url, { method: 'GET', headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`HTTP ${r.statusCode}`);
  return JSON.parse(text);
}

export class FamilyDetection {
  private detected: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly o: { baseUrl: string; log: Logger; retryMs?: number; timeoutMs?: number }) {}

  /** The CONTINUATION_MODEL in effect: the detected name, or undefined (requests pass through). */
  model(): string | undefined {
    return this.detected;
  }

  async start(): Promise<void> {
    await this.attempt();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    const base = this.o.baseUrl.replace(/\/+$/, '');
    const t = this.o.timeoutMs ?? 2000;
    const [models, modelInfo, props] = await Promise.all(
      ['/v1/models', '/get_model_info', '/props'].map((p) => getJson(`${base}${p}`, t).catch(() => undefined)),
    );
    const names = servedNames({ models, modelInfo, props });
    const name = detectFamilyName(names);
    if (name) {
      this.detected = name;
      const family = selectFamily(name).family.name;
      this.o.log.info({ decision: 'FAMILY_DETECTED', family, served_as: name }, 'model family detected from the engine');
      return;
    }
    if (names.length > 0) {
      this.o.log.warn(
        { decision: 'FAMILY_UNDETECTED', served_names: names, known_families: knownFamilies() },
        'CONTINUATION_MODEL=auto: the engine serves no model a family knows; no stream is continued (set CONTINUATION_MODEL)',
      );
      return;
    }
    this.timer = setTimeout(() => void this.attempt(), this.o.retryMs ?? 5000);
    this.timer.unref();
  }
}
