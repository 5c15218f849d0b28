// The per-request state, one field with one way to change it (grpc-js retrying-call.ts has the same shape:
// one `state`, and a commit that happens once). The names are what the client has been given so far:
//
//   prefill ──commit──► decode ──► continuing ──► done | interrupted
//      │                  │            │
//      └──► answered      └────────────┴──► gone (client left)
//
// prefill: nothing delivered, headers included; a failed attempt is re-run whole.
// decode: the first delta was delivered (committed); leg 1 streams.
// continuing: leg 1 failed after the commit point; a continuation is being admitted, sent or relayed.
// done / interrupted / answered / gone: ended with a complete answer / the interruption event / an HTTP
// answer without a stream (an error, or the engine's own non-streaming answer) / because the client left.
// A shutdown (the drain deadline) is not a state: it is the request's cancellation cause (cancellation.ts),
// and the request then ends from the state it is in.
import { ERROR_CODES, GatewayError } from '../errors';

export type RequestState = 'prefill' | 'decode' | 'continuing' | 'done' | 'interrupted' | 'answered' | 'gone';

const NEXT: Readonly<Record<RequestState, readonly RequestState[]>> = {
  prefill: ['decode', 'answered', 'gone'],
  decode: ['continuing', 'done', 'interrupted', 'gone'],
  continuing: ['done', 'interrupted', 'gone'],
  done: [],
  interrupted: [],
  answered: [],
  gone: [],
};

/** Past the commit point: the first delta reached the client (an ended stream that had one included). */
export function isCommitted(s: RequestState): boolean {
  return s === 'decode' || s === 'continuing' || s === 'done' || s === 'interrupted';
}

export function isTerminal(s: RequestState): boolean {
  return NEXT[s].length === 0;
}

export function canMove(from: RequestState, to: RequestState): boolean {
  return NEXT[from].includes(to);
}

export class IllegalTransitionError extends GatewayError {
  readonly code = ERROR_CODES.illegalTransition;
  constructor(
    readonly from: RequestState,
    readonly to: RequestState,
  ) {
    super(`illegal request state transition ${from} -> ${to}`);
  }
}
