// The safety net behind the family table: a continuation whose first words restart the answer the client
// already has is never appended. A leg 2 given a prompt its model does not read as "continue this" (a wrong
// CONTINUATION_MODEL, a template we have not seen) typically answers from the beginning again; appended, that
// would be a duplicated answer presented as a success. Pure: the relay feeds it leg 2's text and holds leg 2's
// bytes back until it says `ok`.

export type RestartVerdict = 'pending' | 'ok' | 'restart';

/** Below this many delivered characters a coincidence is too likely to call anything a restart. */
const MIN_EVIDENCE = 8;
/** How much of the delivered start leg 2 must repeat to count as a restart. */
const COMPARED = 24;

export class RestartGuard {
  private verdict: RestartVerdict;
  private seen = '';
  private readonly expected: string;

  /** `delivered`: what the client has; `phase`: where it was cut (leg 2 continues that part). */
  constructor(
    delivered: { reasoning: string; content: string },
    private readonly phase: 'reasoning' | 'content',
  ) {
    const start = (phase === 'content' ? delivered.content : delivered.reasoning).trimStart();
    this.expected = start.slice(0, COMPARED);
    // Too little was delivered to recognise a restart; only a new reasoning after content still counts.
    this.verdict = this.expected.length < MIN_EVIDENCE && phase === 'reasoning' ? 'ok' : 'pending';
  }

  get state(): RestartVerdict {
    return this.verdict;
  }

  /** One leg 2 delta. Text in the other part than the cut one settles the question (with one exception). */
  observe(reasoning: string, content: string): RestartVerdict {
    if (this.verdict !== 'pending') return this.verdict;
    if (this.phase === 'content' && this.expected.length < MIN_EVIDENCE)
      return reasoning ? this.settle('restart') : content ? this.settle('ok') : 'pending';
    // Once content has been delivered the thinking is over: a continuation that thinks again started anew.
    if (this.phase === 'content' && reasoning) return this.settle('restart');
    const same = this.phase === 'content' ? content : reasoning;
    const other = this.phase === 'content' ? '' : content;
    this.seen += same;
    const seen = this.seen.trimStart();
    if (seen.length >= this.expected.length) return this.settle(this.decide(seen));
    if (other) return this.settle(this.decide(seen));
    return 'pending';
  }

  /** Leg 2 ended (finished or failed) while pending: decide on what it said. */
  finish(): RestartVerdict {
    return this.verdict === 'pending' ? this.settle(this.decide(this.seen.trimStart())) : this.verdict;
  }

  private decide(seen: string): RestartVerdict {
    if (this.expected.length < MIN_EVIDENCE) return 'ok';
    const n = Math.min(seen.length, this.expected.length);
    if (n < MIN_EVIDENCE) return 'ok';
    return seen.slice(0, n) === this.expected.slice(0, n) ? 'restart' : 'ok';
  }

  private settle(v: RestartVerdict): RestartVerdict {
    this.verdict = v;
    return v;
  }
}
