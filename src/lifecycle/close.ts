// Closing the sidecar: the ext_proc server gracefully (bounded), then forced, the admin server last, the
// upstream connections, and the spans still queued exported. Also what a start that failed half-way releases.
import type * as grpc from '@grpc/grpc-js';
import type { HealthStatus } from '../extproc/health';

export interface StartedParts {
  readonly server: grpc.Server;
  /** What of the GatewayContext is closed: the upstream connections and the span exporter. */
  readonly ctx: { readonly upstream: { close(): Promise<void> }; readonly tracing?: { shutdown(): Promise<void> } };
  /** The background checks (src/lifecycle/gateway-context.ts). */
  stopChecks(): void;
}

export interface ClosingParts extends StartedParts {
  readonly health: HealthStatus;
  readonly admin: { close(): Promise<void> };
  /** Called first: /readyz answers 503 from here on. */
  stopListening(): void;
}

/** tryShutdown (the calls in flight end on their own), bounded by graceMs (0 = unbounded), then forced. */
async function shutdownGrpc(server: grpc.Server, graceMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    server.tryShutdown(() => resolve());
    if (graceMs > 0) setTimeout(resolve, graceMs).unref();
  });
  server.forceShutdown();
}

async function closeSidecar(p: ClosingParts, graceMs: number): Promise<void> {
  p.stopListening();
  p.stopChecks();
  p.health.setAll('NOT_SERVING');
  p.health.endWatches();
  await shutdownGrpc(p.server, graceMs);
  await p.admin.close();
  await p.ctx.upstream.close();
  // The spans still queued are exported (bounded) before the process exits: drain() ends here too.
  await p.ctx.tracing?.shutdown();
}

/** close(graceMs = 0): the first call closes; later calls share its promise (and its grace). */
export function closeOnce(parts: ClosingParts): (graceMs?: number) => Promise<void> {
  let closing: Promise<void> | null = null;
  return (graceMs = 0) => {
    if (!closing) closing = closeSidecar(parts, graceMs);
    return closing;
  };
}

/** The admin server could not start: what did start is released before the error goes on. */
export async function abandonStart(p: StartedParts): Promise<void> {
  p.stopChecks();
  p.server.forceShutdown();
  await p.ctx.upstream.close();
  await p.ctx.tracing?.shutdown();
}
