// A shutdown (the drain deadline) and a client that leaves, at each `await` of the request core: the backoff
// before a re-run, the wait for a re-prefill slot (a retry's and a continuation's), the /tokenize call, and a
// leg between its headers and its first token. What the client gets (issue 20, item 4):
//   shutdown, committed:   the interruption event (reason gateway-shutdown) and exactly one [DONE]
//   shutdown, uncommitted: an HTTP 503 with the stable code gateway_shutdown
//   client gone:           nothing more written, every upstream leg aborted
// and in every case the request ends before the sidecar would force-close it (SHUTDOWN_GRACE_MS after
// shutdown()), holding no slot and no waiter.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AdmissionAuthority, ReprefillSlot } from '../../../src/recovery/admission';
import { SHUTDOWN_GRACE_MS } from '../../../src/sidecar';
import { LegOpenError } from '../../../src/upstream/client';
import { forgetDetectedDialects } from '../../../src/upstream/tokenize-dialects';
import { reassemble } from '../../support/client';
import { type Core, chunk, ROLE, settle, startCore } from '../../support/core-fakes';

/** A /tokenize that answers only when told: the core is then inside the tokenize call. */
class HeldTokenizer {
  private readonly server = http.createServer((req, res) => {
    this.received++;
    req.resume();
    req.socket.once('close', () => {
      if (!res.writableEnded) this.abandoned++;
    });
    this.held.push(res);
  });
  private held: http.ServerResponse[] = [];
  received = 0;
  /** Calls the gateway gave up on (closed before their answer). */
  abandoned = 0;

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/tokenize`;
  }
  release(): void {
    for (const res of this.held.splice(0)) if (!res.destroyed) res.end(JSON.stringify({ count: 3, tokens: [1, 2, 3] }));
  }
  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 3000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`never reached: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The request must be over before the sidecar's drain force-closes what is left. */
async function endsBeforeClose(t: Core): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still running'>((r) => {
    timer = setTimeout(() => r('still running'), SHUTDOWN_GRACE_MS);
  });
  const got = await Promise.race([t.done.then(() => 'ended' as const), late]);
  clearTimeout(timer);
  expect(got).toBe('ended');
}

const ENV = {
  STALL_IDLE_TIMEOUT_SECONDS: '5',
  RECOVERY_MAX_CONCURRENT: '1',
  RECOVERY_MIN_CONCURRENT: '1',
  RECOVERY_QUEUE_TIMEOUT_SECONDS: '60',
  RETRY_BACKOFF_SECONDS: '0',
};

interface Point {
  name: string;
  committed: boolean;
  env?: Record<string, string>;
  /** The only re-prefill slot is taken before the request needs it. */
  blockSlot?: boolean;
  /** Brings the request to the await; `tokenizer` is set when the point uses one. */
  reach(t: Core, tokenizer: HeldTokenizer): Promise<void>;
}

/** Leg 1 delivers text and dies: the continuation starts (committed). */
async function failAfterCommit(t: Core): Promise<void> {
  const leg1 = await t.upstream.next(0);
  leg1.head().events(ROLE, chunk({ content: 'Part' }));
  await settle();
  leg1.crash();
}

const POINTS: Point[] = [
  {
    name: 'before admission: the backoff before a re-run',
    committed: false,
    env: { RETRY_BACKOFF_SECONDS: '30' },
    async reach(t) {
      (await t.upstream.next(0)).failBeforeHead(new LegOpenError('reset'));
      await settle();
      await settle();
    },
  },
  {
    name: "waiting for a re-prefill slot (a retry's)",
    committed: false,
    blockSlot: true,
    async reach(t) {
      (await t.upstream.next(0)).failBeforeHead(new LegOpenError('reset'));
      await until(() => (t.ctx.admission as AdmissionAuthority).waiting === 1, 'the retry waiting for a slot');
    },
  },
  {
    name: "between leg 1's headers and its first token",
    committed: false,
    async reach(t) {
      (await t.upstream.next(0)).head().events(ROLE);
      await settle();
    },
  },
  {
    name: 'during the /tokenize call of a continuation',
    committed: true,
    async reach(t, tokenizer) {
      await failAfterCommit(t);
      await until(() => tokenizer.received > 0, 'the /tokenize call');
    },
  },
  {
    name: "waiting for a re-prefill slot (a continuation's)",
    committed: true,
    blockSlot: true,
    async reach(t) {
      await failAfterCommit(t);
      await until(() => (t.ctx.admission as AdmissionAuthority).waiting === 1, 'the continuation waiting for a slot');
    },
  },
  {
    name: "between leg 2's headers and its first token",
    committed: true,
    async reach(t) {
      await failAfterCommit(t);
      (await t.upstream.next(1)).head().events(ROLE);
      await settle();
    },
  },
];

describe('shutdown and client gone at each await of the core', () => {
  let tokenizer: HeldTokenizer;
  let blocker: ReprefillSlot | undefined;
  let tokenizeUrl: string;
  beforeEach(async () => {
    forgetDetectedDialects();
    tokenizer = new HeldTokenizer();
    tokenizeUrl = await tokenizer.start();
  });
  afterEach(async () => {
    blocker?.settle('neutral');
    blocker = undefined;
    await tokenizer.close();
  });

  async function at(p: Point): Promise<Core> {
    const uses = p.name.includes('tokenize');
    const t = startCore({
      ...ENV,
      ...(uses ? { TOKENIZE_URL: tokenizeUrl, TOKENIZE_DIALECT: 'sglang', TOKENIZE_TIMEOUT_MS: '30000' } : {}),
      ...p.env,
    });
    if (p.blockSlot) {
      const a = await t.ctx.admission.request().result;
      if (!a.admitted) throw new Error('the blocking slot was refused');
      blocker = a.slot;
    }
    await p.reach(t, tokenizer);
    expect(t.r.committed).toBe(p.committed);
    return t;
  }

  async function expectNothingHeld(t: Core, p: Point): Promise<void> {
    const authority = t.ctx.admission as AdmissionAuthority;
    expect(authority.waiting).toBe(0);
    expect(authority.inFlight).toBe(p.blockSlot ? 1 : 0);
    expect(t.upstream.legs.every((l) => l.aborted || l.failed)).toBe(true);
    // The server learns of the aborted calls when their sockets close.
    if (p.name.includes('tokenize')) await until(() => tokenizer.abandoned === tokenizer.received, 'every /tokenize call aborted');
  }

  for (const p of POINTS) {
    it(`shutdown ${p.name}: ${p.committed ? 'the interruption event and one [DONE]' : 'HTTP 503 gateway_shutdown'}`, async () => {
      const t = await at(p);
      const legs = t.upstream.legs.length;
      t.r.shutdown();
      await endsBeforeClose(t);
      expect(t.stream.resetWith).toBeNull();
      expect(t.stream.ended).toBe(true);
      if (p.committed) {
        const got = reassemble(t.stream.body);
        expect(got.errors).toEqual([
          expect.objectContaining({ code: 'upstream_decode_interrupted', reason: 'gateway-shutdown', partial_output: true }),
        ]);
        expect(t.stream.body.split('data: [DONE]').length - 1).toBe(1);
        expect(t.stream.body.endsWith('data: [DONE]\n\n')).toBe(true);
        expect(got.content).toBe('Part');
      } else {
        expect(t.stream.status).toBe(503);
        expect(JSON.parse(t.stream.body).error).toMatchObject({ code: 'gateway_shutdown', reason: 'gateway-shutdown' });
      }
      expect(t.upstream.legs).toHaveLength(legs); // no leg sent after the shutdown
      await expectNothingHeld(t, p);
    });

    it(`client gone ${p.name}: nothing more written, every leg aborted`, async () => {
      const t = await at(p);
      const legs = t.upstream.legs.length;
      const calls = t.stream.calls;
      t.r.clientGone('client-cancelled');
      await endsBeforeClose(t);
      expect(t.stream.calls).toBe(calls);
      expect(t.stream.resetWith).toBeNull();
      expect(t.upstream.legs).toHaveLength(legs);
      await expectNothingHeld(t, p);
      expect(t.r.outcome).toBe('client-disconnected');
    });
  }

  it('the drain during a recovery (issue 20): shutdown while tokenizing, the only slot taken: the interruption event, no reset', async () => {
    // What the issue reproduced: the wait for a slot started after shutdown() and was never cancelled; the
    // request ended at the queue timeout, after the sidecar had force-closed it (a reset, no finish_reason,
    // no interruption event).
    const t = startCore({
      ...ENV,
      RECOVERY_QUEUE_TIMEOUT_SECONDS: '3',
      TOKENIZE_URL: tokenizeUrl,
      TOKENIZE_DIALECT: 'sglang',
      TOKENIZE_TIMEOUT_MS: '30000',
    });
    const a = await t.ctx.admission.request().result;
    if (!a.admitted) throw new Error('the blocking slot was refused');
    blocker = a.slot;
    await failAfterCommit(t);
    await until(() => tokenizer.received > 0, 'the /tokenize call');
    t.r.shutdown();
    tokenizer.release(); // an answer that was on its way: the continuation must not wait for a slot after it
    await endsBeforeClose(t);
    expect(t.stream.resetWith).toBeNull();
    expect(reassemble(t.stream.body).errors).toEqual([expect.objectContaining({ reason: 'gateway-shutdown' })]);
    expect(t.stream.body.endsWith('data: [DONE]\n\n')).toBe(true);
    expect((t.ctx.admission as AdmissionAuthority).waiting).toBe(0);
    expect(t.upstream.legs).toHaveLength(1);
  });
});
