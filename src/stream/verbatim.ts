// Passes a non-streaming upstream answer (an error status, a JSON body) to the client unchanged.
import type { LegResponse } from '../upstream/client';
import { clientResponseHeaders } from '../request/forward-headers';
import type { Delivery } from './delivery';

/** Bounded: error bodies are small; anything beyond this is streamed through chunk by chunk. */
export async function relayVerbatim(delivery: Delivery, res: LegResponse, isGone: () => boolean): Promise<void> {
  delivery.setHeaders(res.status, clientResponseHeaders(res.headers));
  await delivery.commit();
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      if (isGone()) {
        res.body.destroy();
        return;
      }
      await delivery.write(chunk);
    }
    await delivery.end();
  } catch {
    // The upstream died in the middle of its error body: reproduce that for the client.
    delivery.reset('upstream reset during a passed-through response');
  }
}
