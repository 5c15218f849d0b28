// The per-request state, one field with one way to change it (grpc-js retrying-call.ts has the same shape:
// one `state`, and a commit that happens once). The names are what the client has been given so far:
//
//   prefill ──commit──► decode ──► continuing ──► done | interrupted
//      │                  │            │
//      └──► answered      └────────────┴──► gone (client left) · shutting-down (drain deadline) ──► ...
//
// prefill: nothing delivered, headers included; a failed attempt is re-run whole.
// decode: the first delta was delivered (committed); leg 1 streams.
// continuing: leg 1 failed after the commit point; a continuation is being admitted, sent or relayed.
// shutting-down: the drain deadline aborted the current leg; the stream then ends explicitly.
// done / interrupted / answered / gone: ended with a complete answer / the interruption event / an HTTP
// answer without a stream (an error, or the engine's own non-streaming answer) / because the client left.
import { GatewayError } from '../errors';

export type RequestState = 'prefill' | 'decode' | 'continuing' | 'shutting-down' | 'done' | 'interrupted' | 'answered' | 'gone';

const NEXT: Readonly<Record<RequestState, readonly RequestState[]>> = {
  prefill: ['decode', 'answered', 'gone', 'shutting-down'],
  decode: ['continuing', 'done', 'interrupted', 'gone', 'shutting-down'],
  continuing: ['done', 'interrupted', 'gone', 'shutting-down'],
  // The commit point may still pass while shutting down (events already read); the state stays shutting-down
  // (the Delivery knows it committed) so the failure path ends the stream for the shutdown.
  'shutting-down': ['done', 'interrupted', 'answered', 'gone'],
  done: [],
  interrupted: [],
  answered: [],
  gone: [],
};

export function isTerminal(s: RequestState): boolean {
  return NEXT[s].length === 0;
}

export function canMove(from: RequestState, to: RequestState): boolean {
  return NEXT[from].includes(to);
}

export class IllegalTransitionError extends GatewayError {
  readonly code = 'GW_ERR_ILLEGAL_TRANSITION';
  constructor(
    readonly from: RequestState,
    readonly to: RequestState,
  ) {
    super(`illegal request state transition ${from} -> ${to}`);
  }
}
