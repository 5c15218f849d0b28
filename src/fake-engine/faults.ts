// Fault injection. A test scripts a whole scenario in one header value (`crash@12;stall@3`) and every
// request carrying that same value takes the next spec, whichever replica it lands on: the registry is
// module-level so that all FakeEngine instances of the process share it.

export type FaultKind =
  | 'crash'
  | 'fin'
  | 'eof'
  | 'stall'
  | 'error'
  | 'abort'
  | 'nodone'
  | 'malformed'
  | 'status'
  | 'hang'
  | 'slow'
  | 'crash-before-headers';

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
}

const AT_KINDS = new Set<FaultKind>(['crash', 'fin', 'eof', 'stall', 'error', 'abort', 'malformed']);

/** Parses one spec; throws on anything unknown so a typo in a test fails loudly instead of passing. */
export function parseFault(spec: string): Fault {
  const s = spec.trim();
  if (s === 'hang' || s === 'crash-before-headers') return { kind: s, spec: s, at: 0 };
  const m = /^([a-z]+)@(.+)$/.exec(s);
  if (!m) throw new Error(`fake-engine: bad fault spec '${s}'`);
  const [, kind, arg] = m;
  if (kind === 'nodone') return { kind, spec: s, at: 0 };
  if (kind === 'status' && /^\d{3}$/.test(arg)) return { kind, spec: s, at: 0, status: Number(arg) };
  if (kind === 'slow' && /^\d+$/.test(arg)) return { kind, spec: s, at: 0, ms: Number(arg) };
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

/**
 * Takes the next fault for a request carrying `header` (throws if the header is malformed). Steps are
 * consumed in order per process. A single-step script never applies to a continuation request: with the
 * replicas as separate processes (the demo) the gateway's continuation lands on a replica that has not
 * consumed the step yet, and `crash@30` means "the leg that serves the answer crashes", not every leg.
 */
export function takeFault(header: string | undefined, continuation = false): Fault | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const list = parseFaultList(header);
  const n = consumed.get(header) ?? 0;
  consumed.set(header, n + 1);
  if (continuation && list.length === 1) return undefined;
  return list[n];
}

export function resetFaults(): void {
  consumed.clear();
}
