// What a leg's response head says, before any body is read (pure; the flags come from our egress route,
// x-gateway-upstream-flags = Envoy's %RESPONSE_FLAGS%).
import { isResetBeforeHeaders, isRouterTierUnreachable } from '../request/forward-headers';
import type { LegHeaders } from './leg-body';

export type LegHead =
  | 'event-stream' // 200 text/event-stream: the answer streams
  | 'not-event-stream' // 200 with any other content type, to a streaming request: no stream an SDK can read
  | 'router-unreachable' // Envoy could reach no router-tier host (UF, UH, UO, NC)
  | 'reset-before-headers' // Envoy's own reply for a replica that reset or closed before its headers (UC, UR, LR)
  | 'overloaded' // a 503 from the replica or router: it generated nothing
  | 'server-error' // a 500, 502 or 504 from the replica or router, before any byte of an answer: re-run like a 503
  | 'other-answer'; // anything else (the engine's 4xx, 429 included, other 5xx, a JSON body): passed through unchanged

export function classifyLegHead(status: number, headers: LegHeaders): LegHead {
  const ctype = String(headers['content-type'] ?? '');
  if (status === 200) return ctype.toLowerCase().includes('text/event-stream') ? 'event-stream' : 'not-event-stream';
  if (isRouterTierUnreachable(headers)) return 'router-unreachable';
  if (isResetBeforeHeaders(headers)) return 'reset-before-headers';
  if (status === 503) return 'overloaded';
  if (status === 500 || status === 502 || status === 504) return 'server-error';
  return 'other-answer';
}
