// The drain (SIGTERM): new requests are passed through (ctx.drain), health NOT_SERVING, the originated
// streams in flight get up to the deadline to end (DRAINED); past it (DRAIN_TIMEOUT) each is shut down (the
// interruption event, or before its first delta a 503) and gets SHUTDOWN_GRACE_MS more; then the sidecar closes.
// The stop now (SIGINT, or a signal during the drain: src/lifecycle/stop-ladder.ts) is the same without the
// wait (STOP_NOW): every stream still open ends with the interruption event, never a silent cut.
import type { HealthStatus } from '../extproc/health';
import type { GatewayContext } from '../stream/context';

/**
 * After the drain deadline, how long the streams still in flight get to end with the interruption event (or a
 * 503) before the server closes and Envoy resets whatever is left.
 */
export const SHUTDOWN_GRACE_MS = 2000;

/** How often the drain looks at the stream count. */
const POLL_MS = 25;

/** The least grace the close after a drain gives the gRPC calls left (pass-through streams, late ones). */
const MIN_CLOSE_GRACE_MS = 1000;

/** The close's gRPC grace after a drain: what is left of the drain's deadline, at least MIN_CLOSE_GRACE_MS. */
export function closeGraceAfterDrain(timeoutMs: number, elapsedMs: number): number {
  return Math.max(MIN_CLOSE_GRACE_MS, timeoutMs - elapsedMs);
}

export interface DrainingParts {
  readonly ctx: Pick<GatewayContext, 'drain' | 'streams' | 'inFlight' | 'log'>;
  readonly health: HealthStatus;
  close(graceMs: number): Promise<void>;
}

/** Resolves when no originated stream is in flight, or at `deadline` (epoch ms), whichever comes first. */
async function streamsEnded(streams: { readonly active: number }, deadline: number): Promise<void> {
  while (streams.active > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, POLL_MS));
}

/** Past the deadline, or told to stop now: never a silent cut, each stream ends with the interruption event (or an error answer). */
async function shutDownInFlight(ctx: DrainingParts['ctx'], why: 'DRAIN_TIMEOUT' | 'STOP_NOW'): Promise<void> {
  if (why === 'DRAIN_TIMEOUT')
    ctx.log.warn(
      { decision: 'DRAIN_TIMEOUT', active_streams: ctx.streams.active },
      'drain deadline reached with streams in flight: ending them with the interruption event',
    );
  else
    ctx.log.info(
      { decision: 'STOP_NOW', active_streams: ctx.streams.active },
      'stopping now: ending the streams in flight with the interruption event',
    );
  for (const r of ctx.inFlight) r.shutdown();
  await streamsEnded(ctx.streams, Date.now() + SHUTDOWN_GRACE_MS);
}

async function drainSidecar(p: DrainingParts, timeoutMs: number): Promise<void> {
  const { ctx } = p;
  ctx.drain.draining = true;
  p.health.setAll('NOT_SERVING');
  const started = Date.now();
  ctx.log.info(
    { decision: 'DRAIN', active_streams: ctx.streams.active, timeout_ms: timeoutMs },
    'draining: new requests are passed through',
  );
  await streamsEnded(ctx.streams, started + timeoutMs);
  if (ctx.streams.active > 0) await shutDownInFlight(ctx, 'DRAIN_TIMEOUT');
  else ctx.log.info({ decision: 'DRAINED', drain_ms: Date.now() - started }, 'drained: closing');
  // Whatever is left (pass-through ext_proc streams, or streams past the deadline) gets a short grace.
  await p.close(closeGraceAfterDrain(timeoutMs, Date.now() - started));
}

/** drain(timeoutMs): the first call drains then closes; later calls share its promise. */
export function drainOnce(parts: DrainingParts): (timeoutMs: number) => Promise<void> {
  let draining: Promise<void> | null = null;
  return (timeoutMs) => {
    if (!draining) draining = drainSidecar(parts, timeoutMs);
    return draining;
  };
}

/** Stops taking streams and ends those in flight at once with the interruption event, then closes. */
async function stopSidecarNow(p: DrainingParts): Promise<void> {
  p.ctx.drain.draining = true;
  p.health.setAll('NOT_SERVING');
  await shutDownInFlight(p.ctx, 'STOP_NOW');
  await p.close(MIN_CLOSE_GRACE_MS);
}

/** stopNow(): the first call ends the streams in flight and closes (during a drain too); later calls share it. */
export function stopNowOnce(parts: DrainingParts): () => Promise<void> {
  let stopping: Promise<void> | null = null;
  return () => {
    if (!stopping) stopping = stopSidecarNow(parts);
    return stopping;
  };
}
