// The OpenTelemetry SDK behind src/obs/tracing.ts, required only when tracing is on. A tracer provider of its
// own (never the global one), the client's context read and each leg's written with the OTEL_PROPAGATORS
// propagators (tracing-propagation.ts), a BatchSpanProcessor with a bounded queue and OpenTelemetry's OTLP
// exporter for the configured protocol (tracing-exporter.ts). OTEL_TRACES_SAMPLER(_ARG),
// OTEL_RESOURCE_ATTRIBUTES and the other OTEL_BSP_* are read by the SDK itself (from the process environment).
import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { LegStart, RequestEndView, RequestTrace, Tracing, TracingConfig } from './tracing';
import { chatSpanName, commonAttributes, decisionAttributes, outcomeIsError, responseAttributes } from './tracing-attributes';
import { createSpanExporter } from './tracing-exporter';
import { createPropagator } from './tracing-propagation';

const getter: TextMapGetter<Record<string, string>> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => c[k.toLowerCase()],
};
const setter: TextMapSetter<Record<string, string>> = {
  set: (c, k, v) => {
    c[k] = v;
  },
};

export class SdkTracing implements Tracing {
  readonly enabled = true;
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator: TextMapPropagator;
  /** gen_ai.operation.name, gen_ai.provider.name and server.* of every span. */
  private readonly common: Attributes;

  constructor(cfg: TracingConfig) {
    const resource = defaultResource()
      .merge(detectResources({ detectors: [envDetector] }))
      .merge(resourceFromAttributes({ 'service.name': cfg.serviceName }));
    this.propagator = createPropagator(cfg.propagators);
    this.common = commonAttributes(cfg.providerName, cfg.serverAddress);
    // The export's timeout (OTEL_EXPORTER_OTLP_TIMEOUT) also bounds shutdown's last export, retries included.
    const exporter = createSpanExporter(cfg);
    this.provider = new BasicTracerProvider({
      resource,
      spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: cfg.maxQueueSize, scheduledDelayMillis: cfg.scheduleDelayMs })],
    });
    this.tracer = this.provider.getTracer('continuation-gateway');
  }

  request(clientHeaders: Record<string, string>, requestModel: string | undefined, maxTokens: unknown): RequestTrace {
    // The client's JSON: a model that is no short string is left out rather than trusted.
    const model = typeof requestModel === 'string' && requestModel.length <= 256 ? requestModel : undefined;
    const parent = this.propagator.extract(ROOT_CONTEXT, clientHeaders, getter);
    const span = this.tracer.startSpan(
      chatSpanName(model),
      {
        kind: SpanKind.SERVER,
        attributes: {
          ...this.common,
          ...(model ? { 'gen_ai.request.model': model } : {}),
          ...(typeof maxTokens === 'number' && Number.isFinite(maxTokens) ? { 'gen_ai.request.max_tokens': maxTokens } : {}),
          ...(clientHeaders['x-request-id'] ? { 'gateway.request_id': clientHeaders['x-request-id'] } : {}),
        },
      },
      parent,
    );
    return new SdkRequestTrace(this.tracer, this.propagator, span, trace.setSpan(parent, span), model, this.common);
  }

  async shutdown(): Promise<void> {
    // The batch processor rejects when its last export failed (a collector that refused it, or was gone past
    // the retries): those spans are lost, which is no failure of the sidecar's shutdown.
    await this.provider.shutdown().catch(() => undefined);
  }
}

class SdkRequestTrace implements RequestTrace {
  private leg: Span | null = null;
  private legStartedAt = 0;
  private legHadFirstToken = false;
  private continuations = 0;
  private ended = false;

  constructor(
    private readonly tracer: Tracer,
    private readonly propagator: TextMapPropagator,
    private readonly span: Span,
    private readonly ctx: Context,
    private readonly model: string | undefined,
    private readonly common: Attributes,
  ) {}

  legStarted(l: LegStart): Record<string, string> | undefined {
    this.closeLeg();
    const kind = l.continuation ? 'continuation' : l.attempt > 1 ? 'retry' : 'leg1';
    // Leg 1 (every attempt of it), then continuation leg n as leg n + 1, as the request records count them.
    const leg = l.continuation ? ++this.continuations + 1 : 1;
    this.leg = this.tracer.startSpan(
      `${chatSpanName(this.model)} ${kind}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          ...this.common,
          ...(this.model ? { 'gen_ai.request.model': this.model } : {}),
          'gateway.leg': leg,
          'gateway.legs_sent': l.sent,
          'gateway.attempt': l.attempt,
          'gateway.leg.kind': kind,
        },
      },
      this.ctx,
    );
    this.legStartedAt = Date.now();
    this.legHadFirstToken = false;
    const headers: Record<string, string> = {};
    this.propagator.inject(trace.setSpan(this.ctx, this.leg), headers, setter);
    return headers;
  }

  legAnswered(status: number, replica: string | undefined): void {
    this.leg?.setAttribute('http.response.status_code', status);
    if (replica) this.leg?.setAttribute('gateway.replica', replica);
  }

  legFailedToOpen(kind: string): void {
    this.leg?.setAttribute('error.type', kind);
    this.leg?.setStatus({ code: SpanStatusCode.ERROR, message: kind });
  }

  legFirstToken(): void {
    if (!this.leg || this.legHadFirstToken) return;
    this.legHadFirstToken = true;
    const ms = Date.now() - this.legStartedAt;
    this.leg.setAttribute('gateway.time_to_first_token_ms', ms);
    this.leg.addEvent('first_token');
  }

  legEnded(type: string, failure?: string): void {
    const leg = this.leg;
    if (!leg) return;
    leg.setAttribute('gateway.leg.outcome', type);
    if (type === 'failed') {
      leg.setAttribute('error.type', failure ?? 'failed');
      leg.setStatus({ code: SpanStatusCode.ERROR, message: failure ?? 'failed' });
    } else if (type === 'finished') leg.setStatus({ code: SpanStatusCode.OK });
    this.closeLeg();
  }

  decision(name: string, extra: Record<string, unknown>): void {
    if (!this.ended) this.span.addEvent(name, decisionAttributes(extra));
  }

  end(r: RequestEndView): void {
    if (this.ended) return;
    this.ended = true;
    this.closeLeg();
    const s = this.span;
    s.setAttributes({
      'gateway.outcome': r.outcome,
      'gateway.attempts': r.attempt,
      'gateway.legs': r.legs,
      ...(r.reason ? { 'gateway.reason': r.reason } : {}),
      ...(r.tracker.id ? { 'gen_ai.response.id': r.tracker.id } : {}),
      ...(r.tracker.model ? { 'gen_ai.response.model': r.tracker.model } : {}),
      ...(r.firstDeltaAt !== null ? { 'gateway.time_to_first_delta_ms': r.firstDeltaAt - r.started } : {}),
      ...responseAttributes(r.tracker.finishReason, r.tracker.lastUsage),
    });
    if (outcomeIsError(r.outcome)) {
      s.setAttribute('error.type', r.reason ?? r.outcome);
      s.setStatus({ code: SpanStatusCode.ERROR, message: r.outcome });
    } else if (r.outcome.startsWith('completed')) s.setStatus({ code: SpanStatusCode.OK });
    s.end();
  }

  private closeLeg(): void {
    this.leg?.end();
    this.leg = null;
  }
}
