// A deliberately plain client for tests: it records what a gateway would see of a (possibly broken)
// response — status, raw bytes, how the body ended — without the retries or parsing leniency of an SDK.
import { request } from 'undici';

export interface Collected {
  status: number;
  headers: Record<string, string>;
  /** The body as received, decoded as UTF-8 once at the end (so split multi-byte chars are fine). */
  text: string;
  /** `data:` payloads in order, `[DONE]` included, unparsed. */
  data: string[];
  /** Set when the body did not end cleanly (RST, FIN mid-chunk, timeout). */
  error?: { code?: string; message: string };
  /** True when the timeout fired while still waiting. */
  timedOut: boolean;
}

export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length));
}

/** JSON chunks of a stream, skipping [DONE] and anything unparsable. */
export function sseChunks(c: Collected): any[] {
  const out: any[] = [];
  for (const d of c.data) {
    if (d === '[DONE]') continue;
    try {
      out.push(JSON.parse(d));
    } catch {
      /* malformed events are checked on c.data directly */
    }
  }
  return out;
}

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<Collected> {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), opts.timeoutMs ?? 10000);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout.signal]) : timeout.signal;
  const parts: Buffer[] = [];
  let status = 0;
  const resHeaders: Record<string, string> = {};
  let error: Collected['error'];
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      signal,
    });
    status = res.statusCode;
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) resHeaders[k] = String(v);
    for await (const chunk of res.body) parts.push(chunk as Buffer);
  } catch (e) {
    const err = e as { code?: string; message: string; cause?: { code?: string } };
    error = { code: err.code ?? err.cause?.code, message: err.message };
  } finally {
    clearTimeout(timer);
  }
  const text = Buffer.concat(parts).toString('utf8');
  return { status, headers: resHeaders, text, data: sseData(text), error, timedOut: timeout.signal.aborted };
}
