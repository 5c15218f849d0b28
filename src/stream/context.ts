// What every request shares inside one sidecar process: frozen config, the upstream client, the recovery
// budget, the logger, the metrics and the drain flag.
import type { GatewayConfig } from '../config/env';
import type { Logger } from '../obs/logger';
import type { RecoveryBudget } from '../recovery/planner';
import type { UpstreamClient } from '../upstream/client';
import type { Metrics } from '../obs/metrics';

export interface GatewayContext {
  readonly config: GatewayConfig;
  readonly upstream: UpstreamClient;
  readonly budget: RecoveryBudget;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Set by Sidecar.drain(): new requests are passed through (native proxying). */
  readonly drain: { draining: boolean };
  /** Originated responses in flight, so a drain deadline can end them with the interruption event. */
  readonly inFlight: Set<{ shutdown(): void }>;
}
