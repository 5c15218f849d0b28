// Fault injection. A test scripts a whole scenario in one header value (`crash@12;stall@3`) and every
// request carrying that same value takes the next spec, whichever replica it lands on: the registry is
// module-level so that all FakeEngine instances of the process share it. With the request scope (the demo's
// engines, `--fault-scope request`) each client request runs the script afresh: the steps are counted per
// header value and per request id (the gateway's legs of one request, `<id>`, `<id>-a2`, `<id>-c1`, count as
// one), so `curl -H 'x-fake-fault: crash@30'` crashes every time it is sent.

export type FaultKind =
  | 'crash'
  | 'fin'
  | 'eof'
  | 'stall'
  | 'error'
  | 'abort'
  | 'nodone'
  | 'malformed'
  /** `data: [DONE]` at the index, without a finish_reason, then the end of the body. */
  | 'done'
  /** At the index, the start of an event that never completes, then one space every `ms` (default 200). */
  | 'trickle'
  | 'status'
  | 'hang'
  | 'slow'
  | 'crash-before-headers'
  /**
   * `reject-headers@N`: a replica whose header limit is N bytes: a request whose headers (names and values)
   * total more resets before any response byte, on every request and every replica (never consumed).
   */
  | 'reject-headers'
  /** `200 text/plain` and a line of text: an answer that is no event stream. */
  | 'plain'
  /** `200 text/event-stream` and a clean end of the body, without a single event. */
  | 'empty'
  /** The answer as usual, but its usage chunk counts negative tokens. */
  | 'negative-usage'
  /** At the index, a finish chunk whose finish_reason is the number 42, then `[DONE]` and the end (issue 39). */
  | 'finish-number'
  /** At the index, a finish chunk whose finish_reason is SGLang's internal object `{"type":"stop"}`, then `[DONE]`. */
  | 'finish-object'
  /** At the index, a finish chunk (`stop`), then the rest of the answer and its own finish: two finishes. */
  | 'finish-twice'
  /**
   * `flood@N:<what>:<ms>`: at the index, for ms, as fast as the reader takes them (the engine waits for its
   * socket to drain, as uvicorn does): `comment` (`:\n\n`), `empty-data` (`data:\n\n`, an event whose data is
   * empty) or `data-lines` (`data:\n`, lines of one event that never ends); then the rest of the answer.
   */
  | 'flood'
  /** `bigline@N:<bytes>`: at the index, `data: ` and bytes of `x` without a newline, then the end of the body. */
  | 'bigline';

/** What a flood writes, over and over (see `flood`). */
export const FLOODS = { comment: ':\n\n', 'empty-data': 'data:\n\n', 'data-lines': 'data:\n' } as const;
export type FloodKind = keyof typeof FLOODS;

export interface Fault {
  kind: FaultKind;
  /** The spec as written, recorded in SeenRequest.fault. */
  spec: string;
  /** Token index (chunks already written) at which the fault fires. */
  at: number;
  /** stall: resume after ms (undefined = never); slow: delay before the role chunk. */
  ms?: number;
  /** status: HTTP status to answer. */
  status?: number;
  /** status: the Retry-After (delay-seconds) sent with it (`status@503:2`), if any. */
  retryAfter?: number;
  /** flood: what it writes; bigline: how many bytes (in `ms`'s place: a size, not a time). */
  flood?: FloodKind;
}

const AT_KINDS = new Set<FaultKind>([
  'crash',
  'fin',
  'eof',
  'stall',
  'error',
  'abort',
  'malformed',
  'done',
  'finish-number',
  'finish-object',
  'finish-twice',
]);

/** Parses one spec; throws on anything unknown so a typo in a test fails loudly instead of passing. */
export function parseFault(spec: string): Fault {
  const s = spec.trim();
  if (s === 'hang' || s === 'crash-before-headers' || s === 'plain' || s === 'empty' || s === 'negative-usage')
    return { kind: s, spec: s, at: 0 };
  const m = /^([a-z-]+)@(.+)$/.exec(s);
  if (!m) throw new Error(`fake-engine: bad fault spec '${s}'`);
  const [, kind, arg] = m;
  if (kind === 'nodone') return { kind, spec: s, at: 0 };
  if (kind === 'status') {
    const sm = /^(\d{3})(?::(\d+))?$/.exec(arg);
    if (sm) return { kind, spec: s, at: 0, status: Number(sm[1]), ...(sm[2] === undefined ? {} : { retryAfter: Number(sm[2]) }) };
  }
  if (kind === 'slow' && /^\d+$/.test(arg)) return { kind, spec: s, at: 0, ms: Number(arg) };
  if (kind === 'reject-headers' && /^\d+$/.test(arg)) return { kind, spec: s, at: Number(arg) };
  if (kind === 'trickle') {
    const tm = /^(\d+)(?::(\d+))?$/.exec(arg);
    if (tm) return { kind, spec: s, at: Number(tm[1]), ms: tm[2] === undefined ? 200 : Number(tm[2]) };
  }
  if (kind === 'flood') {
    const fm = /^(\d+):(comment|empty-data|data-lines):(\d+)$/.exec(arg);
    if (fm) return { kind, spec: s, at: Number(fm[1]), flood: fm[2] as FloodKind, ms: Number(fm[3]) };
  }
  if (kind === 'bigline') {
    const bm = /^(\d+):(\d+)$/.exec(arg);
    if (bm) return { kind, spec: s, at: Number(bm[1]), ms: Number(bm[2]) };
  }
  if (kind === 'stall') {
    const sm = /^(\d+)(?::(\d+))?$/.exec(arg);
    if (sm) return { kind, spec: s, at: Number(sm[1]), ms: sm[2] === undefined ? undefined : Number(sm[2]) };
  }
  if (AT_KINDS.has(kind as FaultKind) && kind !== 'stall' && /^\d+$/.test(arg)) {
    return { kind: kind as FaultKind, spec: s, at: Number(arg) };
  }
  throw new Error(`fake-engine: bad fault spec '${s}'`);
}

/** Parses a whole header value; `-` entries are "no fault for this request". */
export function parseFaultList(header: string): (Fault | undefined)[] {
  return header.split(';').map((s) => (s.trim() === '-' ? undefined : parseFault(s)));
}

const consumed = new Map<string, number>();
/** The request scope keeps one counter per request: bounded, the oldest forgotten first (a long demo). */
const MAX_SCRIPTS = 10_000;

/** How steps are counted: per header value (tests), or per header value and client request (the demo). */
export type FaultScope = 'header' | 'request';

/** The client request a leg belongs to: the gateway names its legs `<id>`, `<id>-a<N>` (a retry), `<id>-c<N>`. */
export function baseRequestId(id: string): string {
  return id.replace(/-[ac]\d{1,3}$/, '');
}

/**
 * Takes the next fault for a request carrying `header` (throws if the header is malformed). Steps are
 * consumed in order per process (and, with `requestId`, per client request). A single-step script never
 * applies to a continuation request: with the replicas as separate processes (the demo) the gateway's
 * continuation lands on a replica that has not consumed the step yet, and `crash@30` means "the leg that
 * serves the answer crashes", not every leg.
 */
export function takeFault(header: string | undefined, continuation = false, requestId?: string): Fault | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const list = parseFaultList(header);
  // A header limit is the replica's, not a step of a script: it applies to every request that sends it.
  if (list.length === 1 && list[0]?.kind === 'reject-headers') return list[0];
  const key = requestId === undefined ? header : `${header}\n${baseRequestId(requestId)}`;
  const n = consumed.get(key) ?? 0;
  consumed.delete(key); // re-inserted last: the map's order is the order of use
  consumed.set(key, n + 1);
  if (consumed.size > MAX_SCRIPTS) consumed.delete(consumed.keys().next().value as string);
  if (continuation && list.length === 1) return undefined;
  return list[n];
}

export function resetFaults(): void {
  consumed.clear();
}

/** reject-headers@N: whether a request's headers (names and values, as received) total more than N bytes. */
export function headersExceed(headers: Readonly<Record<string, string>>, limit: number): boolean {
  let n = 0;
  for (const [k, v] of Object.entries(headers)) n += k.length + v.length;
  return n > limit;
}
