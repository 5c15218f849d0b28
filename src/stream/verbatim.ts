// Passes a non-streaming upstream answer (an error status, a JSON body) to the client unchanged.

import { clientResponseHeaders } from '../request/forward-headers';
import type { LegResponse } from '../upstream/client';
import { LegReader } from '../upstream/leg-reader';
import type { Delivery } from './delivery';

/** Bounded: error bodies are small; anything beyond this is streamed through chunk by chunk. */
export async function relayVerbatim(delivery: Delivery, res: LegResponse, isGone: () => boolean): Promise<void> {
  delivery.setHeaders(res.status, clientResponseHeaders(res.headers));
  await delivery.commit();
  const reader = new LegReader(res.body);
  try {
    for (;;) {
      const r = await reader.nextChunks();
      if (isGone()) return;
      if (r.type === 'end') return await delivery.end();
      if (r.type === 'reset') {
        // The upstream died in the middle of its error body: reproduce that for the client.
        return delivery.reset('upstream reset during a passed-through response');
      }
      await delivery.write(r.bytes);
    }
  } finally {
    reader.fence();
  }
}
