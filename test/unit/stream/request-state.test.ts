// The request's transition table (src/stream/request-state.ts), whole: every pair of states, allowed or not.
import { canMove, isTerminal, type RequestState } from '../../../src/stream/request-state';

const STATES: RequestState[] = ['prefill', 'decode', 'continuing', 'done', 'interrupted', 'answered', 'gone'];

// from -> the states it may move to; everything else is illegal.
const ALLOWED: Record<RequestState, RequestState[]> = {
  prefill: ['decode', 'answered', 'gone'], // the commit point; an HTTP answer; the client left
  decode: ['continuing', 'done', 'interrupted', 'gone'],
  continuing: ['done', 'interrupted', 'gone'],
  done: [],
  interrupted: [],
  answered: [],
  gone: [],
};

describe('the transition table', () => {
  const rows = STATES.flatMap((from) => STATES.map((to) => [from, to, ALLOWED[from].includes(to)] as const));
  it.each(rows)('%s -> %s: %s', (from, to, allowed) => {
    expect(canMove(from, to)).toBe(allowed);
  });
  it.each(STATES)('%s is terminal exactly when nothing follows it', (s) => {
    expect(isTerminal(s)).toBe(ALLOWED[s].length === 0);
  });
  it('nothing moves back before the commit point, and a shutdown is not a state', () => {
    for (const from of STATES) expect(canMove(from, 'prefill')).toBe(false);
    expect(STATES).not.toContain('shutting-down');
  });
});
