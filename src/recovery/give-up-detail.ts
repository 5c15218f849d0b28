// What each attempt of a request died of, in order, and the one sentence a give-up tells the client about all
// of them (issue 27): "no response after 2 attempts: empty answer, reset". Pure. The causes are stable codes
// (the FAILED and request_end records list them); the words are fixed per code, so a body never carries an
// exception's text, an address or Envoy's flags (those stay in the log records' `detail`).
import type { FailureCause, FailureKind } from './reasons';

/** An attempt's cause: its failure, told apart where the failure kind alone would mislead. */
export function causeOf(failure: FailureKind, emptyBody = false): FailureCause {
  // A 200 whose body ended before a single event is an empty answer, not an answer cut off.
  return failure === 'eof' && emptyBody ? 'empty-answer' : failure;
}

const WORDS: Record<string, string> = {
  'empty-answer': 'empty answer',
  eof: 'ended without finishing',
  reset: 'reset',
  'error-event': 'error event',
  'abort-finish': 'aborted',
  'malformed-finish': 'malformed finish_reason',
  stall: 'stalled',
  'stall-limit': 'stalled too long',
  'first-delta-timeout': 'no first token in time',
  'first-delta-deadline': 'first-token deadline',
  'headers-timeout': 'no response headers in time',
  overloaded: 'overloaded (503)',
  'server-error': 'server error',
  'model-revision-mismatch': 'another model revision',
  restarted: 'restarted the answer',
  'unexpected-output': 'unexpected output',
  connect: 'unreachable',
  aborted: 'aborted',
};

/** The words for one cause (a status code is named as such). */
export function causeWords(c: FailureCause): string {
  return WORDS[c] ?? (/^status-\d{3}$/.test(c) ? `status ${c.slice(7)}` : c);
}

/** The detail of a give-up before the first delta: every attempt's cause, in order. */
export function giveUpDetail(attempts: number, causes: readonly FailureCause[]): string {
  const n = Math.max(attempts, causes.length);
  const what = causes.length > 0 ? `: ${causes.map(causeWords).join(', ')}` : '';
  return `no response after ${n} attempt${n === 1 ? '' : 's'}${what}`;
}
