// One client request, from the ext_proc stream's first message to its end. It collects the request body,
// decides the scope, and then either hands the request back to Envoy (CONTINUE + echoed body: native
// proxying, the gateway is absent) or originates the response itself (OriginatedResponse).

import { decideResponsesScope } from '../endpoints/responses/scope';
import { CONTINUATION_CHAT_PATH, ResponsesStream } from '../endpoints/responses/stream';
import type { ProcessorStream, ProcessorStreamHandler } from '../extproc/processor-stream';
import { MODEL_UNDETECTED } from '../families/detect';
import { RESPONSES_PATH } from '../openai/responses';
import { endpointOf } from '../request/endpoint';
import { decideScope, scopeByMethod } from '../request/scope';
import { continuationModelOf, type GatewayContext, type InScopeRequest } from './context';
import { OriginatedResponse } from './originated-response';

type Phase = 'headers' | 'body' | 'passthrough' | 'originating' | 'finished';

export class RequestExchange implements ProcessorStreamHandler {
  private phase: Phase = 'headers';
  private headers: Record<string, string> = {};
  private chunks: Buffer[] = [];
  private bodyBytes = 0;
  private bodyEnded = false;
  private originated: OriginatedResponse | null = null;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly stream: ProcessorStream,
  ) {}

  onRequestHeaders(headers: Record<string, string>, endOfStream: boolean): void {
    this.headers = headers;
    const byMethod = scopeByMethod(headers[':method']);
    if (byMethod) return this.passthrough(byMethod.reason, byMethod.detail);
    if (endOfStream) {
      // No body: nothing we could continue. Envoy proxies it.
      this.passthrough('no-body');
      return;
    }
    this.phase = 'body';
  }

  onRequestBody(chunk: Buffer, endOfStream: boolean): void {
    if (this.bodyEnded) return; // Envoy bug #46237: a duplicate end-of-stream chunk for ~1 MB bodies.
    if (endOfStream) this.bodyEnded = true;
    if (this.phase === 'passthrough') {
      this.stream.echoBody(chunk, endOfStream);
      return;
    }
    if (this.phase !== 'body') return;
    this.chunks.push(chunk);
    this.bodyBytes += chunk.length;
    if (this.bodyBytes > this.ctx.config.maxRequestBodyBytes) {
      this.passthrough('body-too-large-to-buffer');
      return;
    }
    if (endOfStream) this.decide();
  }

  onRequestTrailers(): void {
    // Trailers end the body too (gRPC-style clients); chat requests never have them in practice.
    if (this.phase === 'passthrough') {
      this.stream.continueTrailers();
      return;
    }
    if (this.phase === 'body') {
      this.bodyEnded = true;
      this.passthrough('request-trailers');
    }
  }

  onGone(reason: string): void {
    const wasPhase = this.phase;
    this.phase = 'finished';
    if (this.originated) this.originated.clientGone(reason);
    else if (wasPhase !== 'passthrough')
      this.ctx.log.info({ request_id: this.headers['x-request-id'], reason, phase: wasPhase }, 'client gone before a decision');
  }

  private decide(): void {
    if (this.ctx.drain.draining) return this.passthrough('draining');
    const raw = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const cfg = this.ctx.config;
    const model = continuationModelOf(this.ctx);
    if (model === undefined && cfg.continuationModel !== undefined && cfg.continuationModel.trim() !== '')
      return this.passthrough(MODEL_UNDETECTED);
    const endpoint = endpointOf(this.headers[':path']);
    if (endpoint === 'responses') return this.decideResponses(raw, model);
    const scope = decideScope(raw, {
      continuationModel: model,
      engine: cfg.engine,
      maxContinuationBodyBytes: cfg.maxContinuationBodyBytes,
      bufferStructuredOutput: cfg.bufferStructuredOutput,
      maxJsonDepth: cfg.maxBodyJsonDepth,
      endpoint,
    });
    if (!scope.inScope) {
      this.passthrough(scope.reason, scope.detail);
      return;
    }
    const envoyTooOld = this.ctx.envoyVersion?.passthroughReason();
    if (envoyTooOld) return this.passthrough(envoyTooOld);
    this.phase = 'originating';
    this.chunks = [];
    this.ctx.metrics.scope('originated');
    const { inScope: _inScope, bodyBytes: _bytes, ...body } = scope;
    this.originated = new OriginatedResponse(this.ctx, this.stream, {
      ...body,
      path: this.headers[':path'] ?? '/v1/chat/completions',
      clientHeaders: this.headers,
      rawBody: raw,
    });
    void this.originated.run().finally(() => {
      this.phase = 'finished';
    });
  }

  /** POST /v1/responses (src/endpoints/responses/scope.ts): originated as a Responses stream, or passed through. */
  private decideResponses(raw: Buffer, model: string | undefined): void {
    const cfg = this.ctx.config;
    const scope = decideResponsesScope(raw, { ...cfg, continuationModel: model, maxJsonDepth: cfg.maxBodyJsonDepth });
    if (!scope.inScope) return this.passthrough(scope.reason, scope.detail);
    const envoyTooOld = this.ctx.envoyVersion?.passthroughReason();
    if (envoyTooOld) return this.passthrough(envoyTooOld);
    const { notContinuable } = scope.chat;
    // Not continuable: the chat form only carries the model to the logs and traces.
    const payload = scope.chat.notContinuable === undefined ? scope.chat.chat : { model: scope.request.model, messages: [] };
    this.originate({
      endpoint: 'responses',
      path: this.headers[':path'] ?? RESPONSES_PATH,
      clientHeaders: this.headers,
      rawBody: raw,
      payload,
      multimodal: false,
      structured: false,
      responses: new ResponsesStream(cfg.maxContinuationPrefixBytes, notContinuable, scope.dialect),
      continuationPath: CONTINUATION_CHAT_PATH,
    });
  }

  private originate(req: InScopeRequest): void {
    this.phase = 'originating';
    this.chunks = [];
    this.ctx.metrics.scope('originated');
    this.originated = new OriginatedResponse(this.ctx, this.stream, req);
    void this.originated.run().finally(() => {
      this.phase = 'finished';
    });
  }

  /** Hands the request back to Envoy untouched: exactly as if the gateway were not there. */
  private passthrough(reason: string, detail?: string): void {
    this.phase = 'passthrough';
    this.ctx.metrics.scope(`passthrough:${reason}`);
    this.ctx.log.info({ request_id: this.headers['x-request-id'], decision: 'PASSTHROUGH', reason, detail }, 'PASSTHROUGH');
    this.stream.continueRequest();
    const chunks = this.chunks;
    this.chunks = [];
    for (let i = 0; i < chunks.length; i++) this.stream.echoBody(chunks[i], this.bodyEnded && i === chunks.length - 1);
  }
}
