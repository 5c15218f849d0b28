// The standard gRPC health service (grpc.health.v1.Health: Check, Watch, List) on the ext_proc server, so Envoy's
// grpc_health_check (and grpc_health_probe) can see the sidecar's state: SERVING while running, NOT_SERVING
// while it drains. Known services: "" (the server) and the ext_proc service.
//
// The service is grpc-node's own `grpc-health-check` package (HealthImplementation, its health.proto); this
// file only adds what the sidecar needs around it: one status for every known service, and ending the Watch
// streams at shutdown (open Watch calls would otherwise keep the server's graceful shutdown waiting).
/* eslint-disable @typescript-eslint/no-explicit-any */
import type * as grpc from '@grpc/grpc-js';
import { HealthImplementation, service as healthService } from 'grpc-health-check';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const HEALTH_SERVICES = ['', EXT_PROC_SERVICE] as const;

/** grpc.health.v1.Health's definition (from grpc-health-check), for clients. */
export function healthServiceDefinition(): grpc.ServiceDefinition {
  return healthService as unknown as grpc.ServiceDefinition;
}

/** Serving status per service name, served by grpc-health-check's HealthImplementation. */
export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly impl: HealthImplementation;
  private readonly watches = new Set<grpc.ServerWritableStream<unknown, unknown>>();

  constructor(initial: ServingStatus = 'NOT_SERVING') {
    for (const s of HEALTH_SERVICES) this.statuses.set(s, initial);
    this.impl = new HealthImplementation(Object.fromEntries(this.statuses));
  }

  get(service = ''): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  /** Sets every known service's status (HealthImplementation tells the watchers). */
  setAll(status: ServingStatus): void {
    for (const s of this.statuses.keys()) {
      this.statuses.set(s, status);
      this.impl.setStatus(s, status);
    }
  }

  /** Ends the Watch streams (server shutdown would otherwise wait for them). */
  endWatches(): void {
    for (const call of this.watches) call.end();
    this.watches.clear();
  }

  /** Adds the health service to the server, recording the Watch calls so that endWatches() can end them. */
  addToServer(server: grpc.Server): void {
    this.impl.addToServer({
      addService: (
        svc: unknown,
        impl: Record<string, grpc.UntypedHandleCall & ((call: grpc.ServerWritableStream<unknown, unknown>) => void)>,
      ) =>
        server.addService(svc as grpc.ServiceDefinition, {
          ...impl,
          watch: (call: grpc.ServerWritableStream<unknown, unknown>) => {
            this.watches.add(call);
            const forget = () => this.watches.delete(call);
            call.on('cancelled', forget);
            call.on('error', forget);
            call.on('finish', forget);
            impl.watch(call);
          },
        }),
    } as unknown as grpc.Server);
  }
}
