// The interruption event's ready continuation request (`next_request`): what the client can send to have the answer
// continued where it stopped, one call for a "continue" button. It is the request the gateway itself would have sent
// as its next continuation leg (src/recovery/continuation-request.ts for chat, src/completions/ for completions): the
// original request plus what the client received (chat: a final assistant message with the delivered text, continued;
// completions: the prompt with the delivered text appended), the budget that is left by the estimate of what was
// delivered. Built from nothing but what the client sent and received: the client's own stream_options are restored
// (the gateway forces usage on its legs only to correct it). None when no continuation could follow this cut (a
// tool call delivered, nothing delivered, the delivered text past MAX_CONTINUATION_PREFIX_BYTES, a budget spent, a
// model family whose output the gateway splits itself), or when it would be larger than
// INTERRUPTION_NEXT_REQUEST_MAX_BYTES (0: never). Pure.
import { planCompletionsContinuation } from '../completions/continuation-request';
import type { JsonObject, ReasoningField } from '../openai/chat';
import { ENDPOINT_PATHS } from '../request/endpoint';
import type { InScopeBody } from '../request/scope';
import { type Leg2Plan, planContinuationRequest } from './continuation-request';
import type { ContinuationTarget } from './leg2-design';
import { estimateRecoveredTokens } from './token-estimate';

/** A request as the client sends it: POST `path` with `body` (JSON), to the gateway as any other. */
export interface NextRequest {
  readonly method: 'POST';
  readonly path: string;
  readonly body: JsonObject;
}

/** What the client received, as the request's tracker kept it. */
export interface Received {
  readonly reasoning: string;
  readonly content: string;
  readonly reasoningField: ReasoningField | null;
  readonly toolCallsSeen: boolean;
  /** The kept text is not all the client has (MAX_CONTINUATION_PREFIX_BYTES). */
  readonly prefixCapped: boolean;
}

export interface NextRequestSettings {
  readonly maxBytes: number;
  readonly rates: { readonly cjk: number; readonly other: number };
  /** How the gateway continues a chat request here (the model family, the engine, the served template). */
  readonly target: ContinuationTarget;
}

export function nextRequest(req: InScopeBody, received: Received, s: NextRequestSettings): NextRequest | undefined {
  if (s.maxBytes <= 0 || received.toolCallsSeen || received.prefixCapped) return undefined;
  const plan = planFor(req, received, s);
  if (plan.kind !== 'send') return undefined;
  const body: JsonObject = { ...plan.body };
  const own = req.payload.stream_options;
  if (own === undefined) delete body.stream_options;
  else body.stream_options = own;
  // A Responses stream is continued through the chat path (src/endpoints/responses): its next request is that leg.
  const path = ENDPOINT_PATHS[req.endpoint === 'responses' ? 'chat' : req.endpoint];
  const next: NextRequest = { method: 'POST', path, body };
  return Buffer.byteLength(JSON.stringify(next)) <= s.maxBytes ? next : undefined;
}

function planFor(req: InScopeBody, received: Received, s: NextRequestSettings): Leg2Plan | { kind: 'none' } {
  if (req.endpoint === 'completions') {
    const recovered = estimateRecoveredTokens(req.payload, '', received.content, s.rates);
    return planCompletionsContinuation(req.payload, received.content, recovered);
  }
  const plan = planContinuationRequest(req.payload, received, { ...s.target, rates: s.rates });
  // Output the gateway splits itself (harmony): sent as is, the engine would answer in raw channel text.
  return plan.kind === 'send' && plan.design.shape.split === 'harmony' ? { kind: 'none' } : plan;
}
