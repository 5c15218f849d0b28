// The interruption contract: when part of an answer was delivered and the gateway cannot (or may not)
// continue it, the stream ends with ONE machine-readable error event and [DONE], never with a silent close
// or a truncated stream that looks complete. OpenAI-compatible clients raise this as an APIError.
import { clientErrorPayload } from '../errors';
import type { NextRequest } from './next-request';
import type { InterruptReason, PreCommitReason } from './reasons';

export interface InterruptionInfo {
  requestId: string | undefined;
  deliveredOutputTokens: number;
  /** A stable code (src/recovery/reasons.ts); with partialOutput false (held structured output) a pre-commit one. */
  reason: InterruptReason | PreCommitReason;
  partialOutput?: boolean;
  /** The ready continuation request (src/recovery/next-request.ts), when there is one: `next_request`, last. */
  nextRequest?: NextRequest;
}

export const INTERRUPTION_CODE = 'upstream_decode_interrupted';

export function interruptionPayload(i: InterruptionInfo): object {
  const partial = i.partialOutput ?? true;
  const payload = clientErrorPayload({
    code: INTERRUPTION_CODE,
    message: partial
      ? `The model replica failed after part of the answer was delivered, and the gateway could not continue it (${i.reason}). The delivered output is incomplete.`
      : `The model replica failed before any output was delivered (${i.reason}).`,
    requestId: i.requestId,
    extra: { partial_output: partial, delivered_output_tokens: i.deliveredOutputTokens },
    retryable: false,
    reason: i.reason,
  });
  return i.nextRequest ? { error: { ...payload.error, next_request: i.nextRequest } } : payload;
}

export function interruptionEvent(i: InterruptionInfo): Buffer {
  return Buffer.from(`data: ${JSON.stringify(interruptionPayload(i))}\n\ndata: [DONE]\n\n`);
}

export const DONE_EVENT = Buffer.from('data: [DONE]\n\n');
