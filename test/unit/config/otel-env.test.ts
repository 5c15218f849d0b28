// Tracing's configuration: the standard OTEL_* variables as src/config/otel-env.ts validates them, and the
// attributes decided from configuration (gen_ai.provider.name, server.address). The spans themselves:
// test/unit/obs/tracing.test.ts (the SDK in its own process) and test/e2e/tracing.e2e.test.ts.
import { type ConfigError, loadConfig } from '../../../src/config/env';
import { parseHostPort, serverAddress } from '../../../src/config/otel-env';
import { parseOtlpHeaders } from '../../../src/obs/otlp-headers';

const BASE = { DOWNSTREAM_URL: 'http://127.0.0.1:1' };
const ON = { ...BASE, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ ...BASE, ...env });
  } catch (e) {
    return (e as ConfigError).problems;
  }
  return [];
}

describe('when tracing is on', () => {
  it('is off without an endpoint, whatever else is set', () => {
    expect(loadConfig({ ...BASE, OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing).toBeUndefined();
  });
  it('OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true turn it off with an endpoint; otlp keeps it on', () => {
    expect(loadConfig({ ...ON, OTEL_TRACES_EXPORTER: 'none' }).tracing).toBeUndefined();
    expect(loadConfig({ ...ON, OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined();
    expect(loadConfig({ ...ON, OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toBeDefined();
    expect(problems({ OTEL_TRACES_EXPORTER: 'zipkin' })[0]).toMatch(/^config error: OTEL_TRACES_EXPORTER zipkin not supported/);
  });
});

describe('where spans go and how', () => {
  it('http/protobuf (the default): <endpoint>/v1/traces, or the traces endpoint as is', () => {
    expect(loadConfig({ ...ON, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toMatchObject({
      protocol: 'http/protobuf',
      tracesUrl: 'http://collector:4318/v1/traces',
      serviceName: 'continuation-gateway',
    });
    const both = { ...ON, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9999/custom' };
    expect(loadConfig(both).tracing?.tracesUrl).toBe('http://b:9999/custom');
    expect(loadConfig({ ...both, OTEL_SERVICE_NAME: 'gw-eu' }).tracing?.serviceName).toBe('gw-eu');
  });
  it('grpc: the endpoint as is (the path is the gRPC method); the traces variable wins over the general one', () => {
    expect(
      loadConfig({ ...ON, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).tracing,
    ).toMatchObject({
      protocol: 'grpc',
      tracesUrl: 'http://collector:4317',
    });
    const t = loadConfig({ ...ON, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).tracing;
    expect(t?.protocol).toBe('http/protobuf');
  });
  it('names the variable of a bad endpoint or an unsupported protocol', () => {
    expect(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })[0]).toMatch(/^config error: OTEL_EXPORTER_OTLP_ENDPOINT /);
    expect(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })[0]).toMatch(
      /^config error: OTEL_EXPORTER_OTLP_PROTOCOL expected http\/protobuf or grpc .*http\/json is not supported/,
    );
    expect(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual([]);
  });
  it('timeout (ms, default 10 s) and compression (gzip or none): the traces variables win', () => {
    expect(loadConfig(ON).tracing).toMatchObject({ timeoutMs: 10_000, compression: 'none' });
    const t = loadConfig({
      ...ON,
      OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '1500',
      OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
    }).tracing;
    expect(t).toMatchObject({ timeoutMs: 1500, compression: 'gzip' });
    expect(
      loadConfig({ ...ON, OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip', OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: 'none' }).tracing?.compression,
    ).toBe('none');
    expect(problems({ OTEL_EXPORTER_OTLP_TIMEOUT: '0' })[0]).toMatch(
      /^config error: OTEL_EXPORTER_OTLP_TIMEOUT expected a positive integer/,
    );
    expect(problems({ OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: 'zstd' })[0]).toMatch(
      /^config error: OTEL_EXPORTER_OTLP_TRACES_COMPRESSION expected gzip or none/,
    );
  });
  it('parses OTEL_EXPORTER_OTLP_HEADERS (percent-encoded values; the traces variable adds to it)', () => {
    expect(parseOtlpHeaders('Api-Key=a%20b, x-tenant=t1,broken')).toEqual({ 'api-key': 'a b', 'x-tenant': 't1' });
    const cfg = loadConfig({ ...ON, OTEL_EXPORTER_OTLP_HEADERS: 'a=1,b=2', OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'b=3' });
    expect(cfg.tracing?.headers).toEqual({ a: '1', b: '3' });
  });
});

describe('OTEL_PROPAGATORS', () => {
  it('defaults to tracecontext,baggage; takes b3 and b3multi; none = no propagator', () => {
    expect(loadConfig(ON).tracing?.propagators).toEqual(['tracecontext', 'baggage']);
    expect(loadConfig({ ...ON, OTEL_PROPAGATORS: 'b3, tracecontext,b3' }).tracing?.propagators).toEqual(['b3', 'tracecontext']);
    expect(loadConfig({ ...ON, OTEL_PROPAGATORS: 'B3MULTI' }).tracing?.propagators).toEqual(['b3multi']);
    expect(loadConfig({ ...ON, OTEL_PROPAGATORS: 'none' }).tracing?.propagators).toEqual([]);
  });
  it('names what it cannot propagate', () => {
    expect(problems({ OTEL_PROPAGATORS: 'tracecontext,jaeger,xray' })[0]).toMatch(
      /^config error: OTEL_PROPAGATORS jaeger, xray not supported/,
    );
  });
});

describe('attributes decided from configuration', () => {
  it('gen_ai.provider.name names the engine (CONTINUATION_ENGINE)', () => {
    expect(loadConfig(ON).tracing?.providerName).toBe('sglang');
    expect(loadConfig({ ...ON, CONTINUATION_ENGINE: 'vllm' }).tracing?.providerName).toBe('vllm');
    expect(loadConfig({ ...ON, CONTINUATION_ENGINE: 'llamacpp' }).tracing?.providerName).toBe('llama.cpp');
  });
  it('server.address: TRACE_SERVER_ADDRESS, else a DOWNSTREAM_URL that is no loopback address, else none', () => {
    // The sidecar's legs go to Envoy's egress listener on loopback: no server to name.
    expect(loadConfig(ON).tracing?.serverAddress).toBeUndefined();
    expect(loadConfig({ ...ON, TRACE_SERVER_ADDRESS: 'router.inference.svc:8000' }).tracing?.serverAddress).toEqual({
      address: 'router.inference.svc',
      port: 8000,
    });
    expect(serverAddress(undefined, 'http://router:8000')).toEqual({ address: 'router', port: 8000 });
    expect(serverAddress(undefined, 'https://router.example')).toEqual({ address: 'router.example', port: 443 });
    expect(serverAddress(undefined, 'http://[::1]:9000')).toBeUndefined();
    expect(serverAddress(undefined, 'http://localhost:9000')).toBeUndefined();
    expect(parseHostPort('[fd00::1]:8000')).toEqual({ address: 'fd00::1', port: 8000 });
    expect(parseHostPort('router')).toEqual({ address: 'router' });
    expect(problems({ TRACE_SERVER_ADDRESS: 'http://router:8000/' })[0]).toMatch(
      /^config error: TRACE_SERVER_ADDRESS expected host or host:port/,
    );
    expect(problems({ TRACE_SERVER_ADDRESS: 'router:70000' })[0]).toMatch(/^config error: TRACE_SERVER_ADDRESS /);
  });
});
