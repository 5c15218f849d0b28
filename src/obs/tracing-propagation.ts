// OTEL_PROPAGATORS as one TextMapPropagator: the client's context is read with every propagator named (the
// first that finds one wins, as CompositePropagator extracts in order), each leg's is written with all of them.
// The spec's names (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/#general-sdk-configuration):
// tracecontext and baggage from @opentelemetry/core, b3 (single `b3` header) and b3multi (`x-b3-*`) from the
// official @opentelemetry/propagator-b3.
import type { TextMapPropagator } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { B3InjectEncoding, B3Propagator } from '@opentelemetry/propagator-b3';
import type { Propagator } from './tracing';

function one(name: Propagator): TextMapPropagator {
  switch (name) {
    case 'tracecontext':
      return new W3CTraceContextPropagator();
    case 'baggage':
      return new W3CBaggagePropagator();
    case 'b3':
      return new B3Propagator({ injectEncoding: B3InjectEncoding.SINGLE_HEADER });
    case 'b3multi':
      return new B3Propagator({ injectEncoding: B3InjectEncoding.MULTI_HEADER });
  }
}

export function createPropagator(names: readonly Propagator[]): TextMapPropagator {
  return new CompositePropagator({ propagators: names.map(one) });
}
