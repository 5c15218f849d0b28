// What a recovery leg's re-prefill slot is settled with. The code that sees a leg end reports the fact
// (SlotEnd: a first token, a status, a failure, ...); this one pure function turns it into the evidence the
// brake and the adaptive limit read (admission-policy.ts BrakeResult), so the rules live in one place.
import { type BrakeResult, brakeEvidence } from './admission-policy';
import type { FailureKind, LegOpenFailure } from './reasons';

export type SlotEnd =
  /** The leg's first token: the re-prefill is done. */
  | { kind: 'first-token' }
  /** The request was cancelled (client gone, shutdown) or the leg superseded: says nothing of the pool. */
  | { kind: 'cancelled' }
  /** The leg produced no response head (src/upstream/client.ts LegOpenError). */
  | { kind: 'open-failed'; open: LegOpenFailure }
  /** A continuation answered with a status and no stream. */
  | { kind: 'status'; status: number; source: string }
  /** Leg 1 answered with something that is no stream (a 4xx, a non-streamed body), passed through as it came. */
  | { kind: 'engine-answer'; status: number }
  /** A 200 without an event stream, or a router tier Envoy cannot reach. */
  | { kind: 'unusable-answer' }
  /** The leg answered, with text the gateway will not append (another revision, a restart, unexpected output). */
  | { kind: 'refused-output' }
  /** The leg failed before its first token; `previous`: how the same request's previous attempt failed. */
  | { kind: 'failed'; failure: FailureKind; previous?: FailureKind; source: string; leg: 'leg1' | 'continuation' };

export function slotEvidence(e: SlotEnd): BrakeResult {
  switch (e.kind) {
    case 'first-token':
      return 'ok';
    case 'cancelled':
    case 'refused-output':
      return 'neutral';
    case 'open-failed':
      // `aborted` is the gateway's own cancel (a deadline, a superseded leg), not the pool's failure.
      return e.open === 'aborted' ? 'neutral' : 'failed';
    case 'status':
      return brakeEvidence({ failure: 'status', status: e.status, source: e.source });
    case 'engine-answer':
      // The engine answered: a 429 or a 5xx says the pool is struggling, anything else that it works.
      return e.status >= 500 || e.status === 429 ? 'failed' : 'ok';
    case 'unusable-answer':
      return 'failed';
    case 'failed':
      // A leg 1 attempt's failure may be the request's own doing (brakeEvidence: `repeat`); a continuation's,
      // after leg 1 answered the same request, is the pool's.
      return e.leg === 'leg1' ? brakeEvidence({ failure: e.failure, previous: e.previous, source: e.source }) : 'failed';
  }
}
