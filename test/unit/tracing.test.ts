// Tracing's pure parts (configuration, what becomes an attribute) and the one property of the off state that
// matters: with no OTLP endpoint, a real sidecar process loads no module of the OpenTelemetry SDK. The spans
// themselves are asserted end to end: test/e2e/tracing.e2e.test.ts.
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { type ConfigError, loadConfig } from '../../src/config/env';
import { parseOtlpHeaders } from '../../src/obs/otlp-headers';
import { createTracing } from '../../src/obs/tracing';
import { decisionAttributes, outcomeIsError } from '../../src/obs/tracing-attributes';
import { startOtlpReceiver } from '../support/otlp-receiver';

const BASE = { DOWNSTREAM_URL: 'http://127.0.0.1:1' };

describe('tracing configuration (the standard OTEL_* variables)', () => {
  it('is off without an endpoint, whatever else is set', () => {
    expect(loadConfig({ ...BASE, OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing).toBeUndefined();
  });
  it('derives <endpoint>/v1/traces, takes the traces endpoint as is, and OTEL_SDK_DISABLED wins', () => {
    expect(loadConfig({ ...BASE, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toMatchObject({
      tracesUrl: 'http://collector:4318/v1/traces',
      serviceName: 'continuation-gateway',
    });
    const both = { ...BASE, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9999/custom' };
    expect(loadConfig(both).tracing?.tracesUrl).toBe('http://b:9999/custom');
    expect(loadConfig({ ...both, OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined();
    expect(loadConfig({ ...both, OTEL_SERVICE_NAME: 'gw-eu' }).tracing?.serviceName).toBe('gw-eu');
  });
  it('names the variable of a bad endpoint or an unsupported protocol', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig({ ...BASE, ...env });
      } catch (e) {
        return (e as ConfigError).problems;
      }
      return [];
    };
    expect(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })[0]).toMatch(/^config error: OTEL_EXPORTER_OTLP_ENDPOINT /);
    expect(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })[0]).toMatch(/^config error: OTEL_EXPORTER_OTLP_PROTOCOL .*http\/protobuf/);
    expect(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' })).toEqual([]);
  });
  it('parses OTEL_EXPORTER_OTLP_HEADERS (percent-encoded values; the traces variable adds to it)', () => {
    expect(parseOtlpHeaders('Api-Key=a%20b, x-tenant=t1,broken')).toEqual({ 'api-key': 'a b', 'x-tenant': 't1' });
    const cfg = loadConfig({
      ...BASE,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'a=1,b=2',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'b=3',
    });
    expect(cfg.tracing?.headers).toEqual({ a: '1', b: '3' });
  });
});

describe('span attributes from decision records', () => {
  it('keeps the allow-listed counts and kinds, never free text', () => {
    const a = decisionAttributes({
      leg: 2,
      failure: 'reset',
      detail: 'connect ECONNREFUSED 10.1.2.3:8000',
      case: 'content',
      replica: 'x',
      accounting: { a: 1 },
    });
    expect(a).toEqual({ 'gateway.leg': 2, 'gateway.failure': 'reset', 'gateway.case': 'content' });
  });
  it('marks the outcomes that are errors', () => {
    expect(['completed', 'completed-after-continuation', 'passed-through-status', 'client-disconnected'].map(outcomeIsError)).toEqual([
      false,
      false,
      false,
      false,
    ]);
    expect(['interrupted', 'failed-before-first-delta', 'error'].map(outcomeIsError)).toEqual([true, true, true]);
  });
});

/** Runs the real sidecar process until it listens, stops it, and returns how many OpenTelemetry SDK modules it loaded. */
function otelModulesLoaded(env: Record<string, string>): Promise<number> {
  const main = path.resolve(__dirname, '../../src/main.js');
  const hook = path.resolve(__dirname, '../support/print-otel-modules.js');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', hook, main], {
      env: {
        PATH: process.env.PATH ?? '',
        ...BASE,
        CONTINUATION_MODEL: 'generic-test',
        PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'error',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.stdout.on('data', (d: Buffer) => {
      if (d.toString().includes('SIDECAR listening')) child.kill('SIGTERM');
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const m = /OTEL_SDK_MODULES_LOADED (\d+)/.exec(stderr);
      m ? resolve(Number(m[1])) : reject(new Error(`no module count (exit ${code}, ${signal}); stderr: ${stderr}`));
    });
  });
}

describe('the sidecar process', () => {
  it('with no OTLP endpoint, loads no module of the OpenTelemetry SDK (tracing off costs a no-op call per hook)', async () => {
    expect(await otelModulesLoaded({ OTEL_SERVICE_NAME: 'gw', OTEL_TRACES_SAMPLER: 'always_on' })).toBe(0);
  });
  it('with an endpoint, loads the SDK (the control: the count above can be non-zero)', async () => {
    // Nothing listens on port 1: the sidecar starts and stops all the same (no span was made, none is sent).
    expect(await otelModulesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' })).toBeGreaterThan(0);
  });
});

describe('OTEL_TRACES_SAMPLER (read by the SDK from the process environment)', () => {
  /** One request's spans through the real SDK and exporter, with the sampler variables given. */
  async function spansWith(sampler: Record<string, string>): Promise<number> {
    const rx = await startOtlpReceiver();
    const saved = { ...process.env };
    Object.assign(process.env, sampler);
    try {
      const t = createTracing({ tracesUrl: `${rx.url}/v1/traces`, serviceName: 't', maxQueueSize: 100, scheduleDelayMs: 50, headers: {} });
      const r = t.request({}, 'm', undefined);
      r.legStarted({ sent: 1, attempt: 1, continuation: false });
      r.end({
        outcome: 'completed',
        reason: undefined,
        attempt: 1,
        legs: 1,
        firstDeltaAt: null,
        started: Date.now(),
        tracker: { id: null, model: null },
      });
      await t.shutdown();
      return rx.spans.length;
    } finally {
      for (const k of Object.keys(sampler)) if (saved[k] === undefined) delete process.env[k];
      await rx.close();
    }
  }
  it('always_off sends nothing; the default sends the request and leg spans', async () => {
    expect(await spansWith({ OTEL_TRACES_SAMPLER: 'always_off' })).toBe(0);
    expect(await spansWith({})).toBe(2);
  });
});
