// The ext_proc gRPC server: Envoy's ExternalProcessor (one Process stream per client request, handed to a
// RequestExchange) and grpc.health.v1 beside it, bound to HOST:PORT.
import * as grpc from '@grpc/grpc-js';
import type { GatewayConfig } from '../config/env';
import type { HealthStatus } from '../extproc/health';
import { ProcessorStream } from '../extproc/processor-stream';
import { extProcServiceDefinition, type ProcessingRequest, type ProcessingResponse } from '../extproc/proto';
import type { GatewayContext } from '../stream/context';
import { RequestExchange } from '../stream/request-exchange';

/** Request bodies up to MAX_REQUEST_BODY_MB arrive as ext_proc messages; grpc-js defaults to 4 MiB. */
const GRPC_MESSAGE_SLACK = 1024 * 1024;

export interface ExtProcServer {
  readonly server: grpc.Server;
  /** The port bound (PORT, or the ephemeral one it got). */
  readonly port: number;
}

/** One Envoy side stream: the exchange that serves the client request it carries. */
function serveProcessStream(ctx: GatewayContext, call: grpc.ServerDuplexStream<ProcessingRequest, ProcessingResponse>): void {
  // The exchange needs the stream and the stream its handler: the handler forwards to the exchange made next.
  let exchange: RequestExchange | null = null;
  const client = new ProcessorStream(call, {
    onRequestHeaders: (h, eos) => exchange?.onRequestHeaders(h, eos),
    onRequestBody: (b, eos) => exchange?.onRequestBody(b, eos),
    onRequestTrailers: () => exchange?.onRequestTrailers(),
    onGone: (reason) => exchange?.onGone(reason),
  });
  exchange = new RequestExchange(ctx, client);
}

/** The server with both services, listening; a bind that fails (port taken) rejects. */
export async function listenExtProc(config: GatewayConfig, ctx: GatewayContext, health: HealthStatus): Promise<ExtProcServer> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxRequestBodyBytes + GRPC_MESSAGE_SLACK,
    'grpc.max_send_message_length': config.maxRequestBodyBytes + GRPC_MESSAGE_SLACK,
    // channelz bookkeeping wraps every call (one ext_proc stream per client request) and nothing here reads it.
    'grpc.enable_channelz': 0,
  });
  server.addService(extProcServiceDefinition(), {
    Process: (call: grpc.ServerDuplexStream<ProcessingRequest, ProcessingResponse>) => serveProcessStream(ctx, call),
  });
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${config.host}:${config.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return { server, port };
}
