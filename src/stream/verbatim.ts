// A non-streaming upstream answer (an error status, a JSON body) as the client gets it: unchanged. An adapter:
// the head and the body's pieces as they come; the request (originated-response.ts) sends them.

import { clientResponseHeaders } from '../request/forward-headers';
import type { LegResponse } from '../upstream/client';
import { LegReader } from '../upstream/leg-reader';
import type { ResponseHead } from './held-output';

export function verbatimHead(res: LegResponse): ResponseHead {
  return { status: res.status, headers: clientResponseHeaders(res.headers) };
}

/**
 * The body, chunk by chunk as it arrives (error bodies are small; nothing is collected), then `end`, or
 * `reset` if the upstream died in the middle of it. Stopping early fences the leg.
 */
export async function* verbatimBody(res: LegResponse): AsyncGenerator<Buffer | 'end' | 'reset'> {
  const reader = new LegReader(res.body);
  try {
    for (;;) {
      const r = await reader.nextChunks();
      if (r.type === 'end' || r.type === 'reset') return yield r.type;
      yield r.bytes;
    }
  } finally {
    reader.fence();
  }
}
