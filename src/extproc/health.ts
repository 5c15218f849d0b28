// The standard gRPC health service (grpc.health.v1.Health: Check and Watch) on the ext_proc server, so Envoy's
// grpc_health_check (and grpc_health_probe) can see the sidecar's state: SERVING while running, NOT_SERVING
// while it drains. Known services: "" (the server) and the ext_proc service.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const HEALTH_SERVICES = ['', EXT_PROC_SERVICE] as const;

const PROTO_ROOT = path.resolve(__dirname, '../../../proto');

let cached: grpc.ServiceDefinition | undefined;

export function healthServiceDefinition(): grpc.ServiceDefinition {
  if (cached) return cached;
  const def = protoLoader.loadSync('grpc/health/v1/health.proto', { includeDirs: [PROTO_ROOT], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as any;
  cached = pkg.grpc.health.v1.Health.service as grpc.ServiceDefinition;
  return cached;
}

type Watcher = { service: string; call: grpc.ServerWritableStream<{ service: string }, { status: string }> };

/** Serving status per service name, and the gRPC handlers that report it. */
export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Set<Watcher>();

  constructor(initial: ServingStatus = 'NOT_SERVING') {
    for (const s of HEALTH_SERVICES) this.statuses.set(s, initial);
  }

  get(service = ''): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  /** Sets every known service's status and tells the watchers. */
  setAll(status: ServingStatus): void {
    for (const s of this.statuses.keys()) this.statuses.set(s, status);
    for (const w of this.watchers) if (this.statuses.has(w.service)) w.call.write({ status });
  }

  /** Ends the Watch streams (server shutdown would otherwise wait for them). */
  endWatches(): void {
    for (const w of this.watchers) w.call.end();
    this.watchers.clear();
  }

  handlers(): grpc.UntypedServiceImplementation {
    return {
      Check: (call: grpc.ServerUnaryCall<{ service: string }, { status: string }>, cb: grpc.sendUnaryData<{ status: string }>) => {
        const status = this.statuses.get(call.request.service ?? '');
        if (!status) return cb({ code: grpc.status.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
        cb(null, { status });
      },
      Watch: (call: grpc.ServerWritableStream<{ service: string }, { status: string }>) => {
        const service = call.request.service ?? '';
        const w: Watcher = { service, call };
        // Unknown services are not an error for Watch: SERVICE_UNKNOWN, and the stream stays open.
        call.write({ status: this.statuses.get(service) ?? 'SERVICE_UNKNOWN' });
        this.watchers.add(w);
        call.on('cancelled', () => this.watchers.delete(w));
        call.on('error', () => this.watchers.delete(w));
      },
    };
  }
}
