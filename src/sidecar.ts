// Assembles the sidecar: the ext_proc gRPC server and what every request shares. Used by src/main.ts
// (the process) and by the end-to-end tests (in-process, so they can read its log records).
import * as grpc from '@grpc/grpc-js';
import type { GatewayConfig } from './config/env';
import { ClientStream } from './extproc/client-stream';
import { extProcServiceDefinition } from './extproc/proto';
import { Counters } from './obs/counters';
import type { Logger } from './obs/logger';
import { RecoveryBudget } from './recovery/planner';
import type { GatewayContext } from './stream/context';
import { RequestExchange } from './stream/request-exchange';
import { UpstreamClient } from './upstream/client';

export interface Sidecar {
  readonly port: number;
  readonly ctx: GatewayContext;
  close(): Promise<void>;
}

/** Request bodies up to MAX_REQUEST_BODY_MB arrive as ext_proc messages; grpc-js defaults to 4 MiB. */
const GRPC_MESSAGE_SLACK = 1024 * 1024;

export async function startSidecar(config: GatewayConfig, log: Logger): Promise<Sidecar> {
  const ctx: GatewayContext = {
    config,
    log,
    upstream: new UpstreamClient({ connectTimeoutMs: config.connectTimeoutMs, headersTimeoutMs: config.upstreamHeadersTimeoutMs }),
    budget: new RecoveryBudget(config.recoveryMaxConcurrent, config.recoveryBudgetPercent),
    metrics: new Counters(),
  };
  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxRequestBodyBytes + GRPC_MESSAGE_SLACK,
    'grpc.max_send_message_length': config.maxRequestBodyBytes + GRPC_MESSAGE_SLACK,
  });
  server.addService(extProcServiceDefinition(), {
    Process(call: grpc.ServerDuplexStream<any, any>) {
      let exchange: RequestExchange | null = null;
      const client = new ClientStream(call, {
        onRequestHeaders: (h, eos) => exchange!.onRequestHeaders(h, eos),
        onRequestBody: (b, eos) => exchange!.onRequestBody(b, eos),
        onRequestTrailers: () => exchange!.onRequestTrailers(),
        onGone: (reason) => exchange!.onGone(reason),
      });
      exchange = new RequestExchange(ctx, client);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${config.host}:${config.port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  log.info({ port, downstream_url: config.downstreamUrl, continuation_url: config.continuationUrl, continuation_model: config.continuationModel ?? null, engine: config.engine, continuation_enabled: config.continuationEnabled }, 'sidecar listening');
  return {
    port,
    ctx,
    async close() {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      server.forceShutdown();
      await ctx.upstream.close();
    },
  };
}
