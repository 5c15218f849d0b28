// What every request shares inside one sidecar process: frozen config, the upstream client, the recovery
// budget, the logger and counters.
import type { GatewayConfig } from '../config/env';
import type { Logger } from '../obs/logger';
import type { RecoveryBudget } from '../recovery/planner';
import type { UpstreamClient } from '../upstream/client';
import type { Counters } from '../obs/counters';

export interface GatewayContext {
  readonly config: GatewayConfig;
  readonly upstream: UpstreamClient;
  readonly budget: RecoveryBudget;
  readonly log: Logger;
  readonly metrics: Counters;
}
