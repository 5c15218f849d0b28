// What a client receives: the raw bytes, and the stream reassembled as an OpenAI client would see it.
import { request } from 'undici';

export interface ClientResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  raw: string;
  chunks: any[];
  ids: string[];
  /** Every distinct `created` of the chunks (one for one stream). */
  created: number[];
  reasoning: string;
  content: string;
  finishReasons: string[];
  usage: any | null;
  errors: any[];
  done: boolean;
  roleChunks: number;
  toolCalls: any[];
  /** The transfer ended with an error (reset / truncated chunked encoding). */
  transportError: string | null;
}

let counter = 0;
export function newRequestId(prefix = 'req'): string {
  return `${prefix}-${process.pid}-${Date.now()}-${++counter}`;
}

export function chatBody(extra: Record<string, unknown> = {}, text = 'Tell me about continuation.'): any {
  return { model: 'test-model', stream: true, messages: [{ role: 'user', content: text }], ...extra };
}

export function completionsBody(extra: Record<string, unknown> = {}, prompt = 'Once upon a time, a replica'): any {
  return { model: 'test-model', stream: true, prompt, ...extra };
}

/** `onBytes` is called for each piece of the body as it arrives (e.g. to know a stream has started). */
export function postChat(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  onBytes?: (text: string) => void,
): Promise<ClientResult> {
  return postStream(`${url}/v1/chat/completions`, body, headers, onBytes);
}

/** POST /v1/completions: the reassembled `content` is every choice's `text`. */
export function postCompletions(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  onBytes?: (text: string) => void,
): Promise<ClientResult> {
  return postStream(`${url}/v1/completions`, body, headers, onBytes);
}

async function postStream(
  target: string,
  body: unknown,
  headers: Record<string, string>,
  onBytes?: (text: string) => void,
): Promise<ClientResult> {
  const res = await request(target, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  let raw = '';
  let transportError: string | null = null;
  try {
    for await (const chunk of res.body) {
      const text = chunk.toString('utf8');
      raw += text;
      onBytes?.(text);
    }
  } catch (e) {
    transportError = (e as Error).message;
  }
  return { status: res.statusCode, headers: res.headers, raw, transportError, ...reassemble(raw) };
}

export function reassemble(raw: string): Omit<ClientResult, 'status' | 'headers' | 'raw' | 'transportError'> {
  const r = {
    chunks: [] as any[],
    ids: [] as string[],
    created: [] as number[],
    reasoning: '',
    content: '',
    finishReasons: [] as string[],
    usage: null as any,
    errors: [] as any[],
    done: false,
    roleChunks: 0,
    toolCalls: [] as any[],
  };
  for (const block of raw.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (!data) continue;
    if (data === '[DONE]') {
      r.done = true;
      continue;
    }
    const j = JSON.parse(data);
    if (j.error) {
      r.errors.push(j.error);
      continue;
    }
    r.chunks.push(j);
    if (j.id && !r.ids.includes(j.id)) r.ids.push(j.id);
    if (typeof j.created === 'number' && !r.created.includes(j.created)) r.created.push(j.created);
    if (j.usage) r.usage = j.usage;
    for (const c of j.choices ?? []) {
      const d = c.delta ?? {};
      if (d.role) r.roleChunks++;
      r.reasoning += d.reasoning_content ?? d.reasoning ?? '';
      r.content += d.content ?? '';
      if (typeof c.text === 'string') r.content += c.text; // a text_completion chunk
      if (d.tool_calls) r.toolCalls.push(...d.tool_calls);
      if (c.finish_reason) r.finishReasons.push(c.finish_reason);
    }
  }
  return r;
}
