// Assembles the sidecar: what every request shares (src/lifecycle/gateway-context.ts), the ext_proc gRPC server
// with grpc.health.v1 (src/lifecycle/extproc-server.ts), the HTTP admin server (/healthz, /readyz, /metrics),
// and its drain and close (src/lifecycle/drain.ts, close.ts). Used by src/main.ts (the process) and by the
// end-to-end tests (in-process, so they can read its log records).
//
// Drain (SIGTERM): health NOT_SERVING and /readyz 503 so Envoy's health check takes the host out; requests
// that still arrive are passed through (CONTINUE + echo: native proxying), streams in flight finish (up to a
// deadline), then everything closes.
import type { GatewayConfig } from './config/env';
import { HealthStatus } from './extproc/health';
import { logFamily } from './families/startup-log';
import { abandonStart, closeOnce, type StartedParts } from './lifecycle/close';
import { drainOnce, stopNowOnce } from './lifecycle/drain';
import { listenExtProc } from './lifecycle/extproc-server';
import { type AdmissionSource, buildGatewayContext } from './lifecycle/gateway-context';
import { startAdminServer } from './obs/admin-server';
import type { Logger } from './obs/logger';
import type { GatewayContext } from './stream/context';

export { SHUTDOWN_GRACE_MS } from './lifecycle/drain';

export interface Sidecar {
  readonly port: number;
  /** The admin server's port (ADMIN_PORT, or the ephemeral one it got). */
  readonly adminPort: number;
  readonly ctx: GatewayContext;
  readonly health: HealthStatus;
  readonly draining: boolean;
  /**
   * Stops taking new streams (health NOT_SERVING, /readyz 503, new requests passed through), waits up to
   * timeoutMs for the originated streams in flight to end, then closes. Idempotent.
   */
  drain(timeoutMs: number): Promise<void>;
  /**
   * Stops now (SIGINT, or a signal during the drain): new requests passed through, every originated stream
   * ends at once with the interruption event (or before its first delta a 503), then closes. Idempotent.
   */
  stopNow(): Promise<void>;
  /** Closes now: gRPC calls get graceMs to end (0 = as long as they take), then are cancelled. */
  close(graceMs?: number): Promise<void>;
}

export interface SidecarOptions {
  /** Serve the admin HTTP server (default true). Cluster workers leave it to the primary. */
  admin?: boolean;
  /**
   * Recovery admission from elsewhere (a cluster worker asks the primary); by default this process is its
   * own authority, with its metrics in its registry.
   */
  admission?: AdmissionSource;
}

type Admin = { port: number; close(): Promise<void> };

/** The admin server (none for a cluster worker); one that cannot start releases what did and rethrows. */
async function startAdmin(
  config: GatewayConfig,
  opts: SidecarOptions,
  ready: () => boolean,
  started: StartedParts & { readonly ctx: GatewayContext },
): Promise<Admin> {
  if (opts.admin === false) return { port: -1, close: async () => undefined };
  try {
    return await startAdminServer({ host: config.adminHost, port: config.adminPort, metrics: started.ctx.metrics, ready });
  } catch (e) {
    await abandonStart(started);
    throw e;
  }
}

function logListening(log: Logger, config: GatewayConfig, port: number, adminPort: number, ctx: GatewayContext): void {
  logFamily(log, config, ctx.chatTemplate?.served());
  log.info(
    {
      port,
      admin_port: adminPort,
      downstream_url: config.downstreamUrl,
      continuation_url: config.continuationUrl,
      continuation_model: config.continuationModel ?? null,
      engine: config.engine,
      continuation_enabled: config.continuationEnabled,
      tracing: ctx.tracing?.enabled ?? false,
    },
    'sidecar listening',
  );
}

export async function startSidecar(config: GatewayConfig, log: Logger, opts: SidecarOptions = {}): Promise<Sidecar> {
  const { ctx, stopChecks } = await buildGatewayContext(config, log, opts.admission);
  const health = new HealthStatus('NOT_SERVING');
  const { server, port } = await listenExtProc(config, ctx, health);
  let listening = true;
  health.setAll('SERVING');
  const admin = await startAdmin(config, opts, () => listening && !ctx.drain.draining, { server, ctx, stopChecks });
  logListening(log, config, port, admin.port, ctx);
  const stopListening = () => {
    listening = false;
  };
  const close = closeOnce({ server, ctx, stopChecks, health, admin, stopListening });
  const drain = drainOnce({ ctx, health, close });
  return {
    port,
    adminPort: admin.port,
    ctx,
    health,
    get draining() {
      return ctx.drain.draining;
    },
    drain,
    stopNow: stopNowOnce({ ctx, health, close }),
    close: (graceMs?: number) => close(graceMs),
  };
}
