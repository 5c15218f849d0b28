// The startup check of the Envoy version (ENVOY_ADMIN_URL, src/extproc/envoy-version.ts): parsing /server_info
// (a real Envoy 1.40's, and istio-proxy-style version strings), the check against a fake admin interface (too
// old, not answering yet, then answering), and RequestExchange passing in-scope requests through while the
// Envoy is too old or its version unknown.
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../../src/config/env';
import {
  ENVOY_TOO_OLD,
  ENVOY_VERSION_UNKNOWN,
  EnvoyVersionCheck,
  isOlderThan,
  parseEnvoyVersion,
} from '../../../src/extproc/envoy-version';
import { createLogger } from '../../../src/obs/logger';
import { Metrics } from '../../../src/obs/metrics';
import { AdmissionAuthority, admissionSettings } from '../../../src/recovery/admission';
import type { GatewayContext } from '../../../src/stream/context';
import { RequestExchange } from '../../../src/stream/request-exchange';
import { ensureEnvoy } from '../../../tools/stack/envoy-binary';

/* eslint-disable @typescript-eslint/no-explicit-any */

function capture() {
  const logs: any[] = [];
  const log = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line)) });
  return { log, logs };
}

/** A fake admin interface whose /server_info answer the test sets (null = 503). */
async function fakeAdmin(): Promise<{ url: string; version: string | null; hits: number; close(): Promise<void> }> {
  const state = { version: null as string | null, hits: 0 };
  const server = http.createServer((req, res) => {
    state.hits++;
    if (req.url !== '/server_info' || state.version === null) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ version: state.version, state: 'LIVE' }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(state, {
    url,
    close: () => new Promise<void>((r) => server.close(() => r())),
  });
}

describe('parseEnvoyVersion / isOlderThan', () => {
  test.each([
    ['a1b2c3/1.40.0/Clean/RELEASE/BoringSSL', '1.40.0', false],
    ['0123abcd/1.37.0/Clean/RELEASE/BoringSSL', '1.37.0', false],
    ['0123abcd/1.37.2-dev/Clean/RELEASE/BoringSSL', '1.37.2', false],
    ['0123abcd/1.36.4-dev/Clean/RELEASE/BoringSSL', '1.36.4', true],
    ['deadbeef/1.29.9/Modified/DEBUG/BoringSSL-FIPS', '1.29.9', true],
  ])('%s', (text, version, old) => {
    const v = parseEnvoyVersion({ version: text })!;
    expect(`${v.major}.${v.minor}.${v.patch}`).toBe(version);
    expect(isOlderThan(v)).toBe(old);
  });

  test('no version', () => {
    expect(parseEnvoyVersion({})).toBeUndefined();
    expect(parseEnvoyVersion({ version: 'abc/dev/Clean' })).toBeUndefined();
    expect(parseEnvoyVersion(null)).toBeUndefined();
  });

  describe('a real Envoy 1.40 admin interface', () => {
    let envoy: ChildProcess | undefined;
    let tmp: string;
    afterAll(async () => {
      if (envoy && envoy.exitCode === null && envoy.signalCode === null) {
        const gone = new Promise((r) => envoy!.once('exit', r));
        envoy.kill('SIGKILL');
        await gone;
      }
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    test('/server_info reads as >= 1.37', async () => {
      const bin = process.env.ENVOY_BIN ?? (await ensureEnvoy());
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-version-'));
      const cfg = path.join(tmp, 'envoy.json');
      const addr = path.join(tmp, 'admin-address');
      fs.writeFileSync(cfg, JSON.stringify({ admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } } }));
      envoy = spawn(bin, ['-c', cfg, '--admin-address-path', addr, '--disable-hot-restart', '-l', 'warning', '--concurrency', '1'], {
        stdio: 'ignore',
      });
      const t0 = Date.now();
      while (!fs.existsSync(addr) || !fs.readFileSync(addr, 'utf8').trim()) {
        if (Date.now() - t0 > 20_000) throw new Error('Envoy wrote no admin address within 20 s');
        await new Promise((r) => setTimeout(r, 50));
      }
      const { log, logs } = capture();
      const check = new EnvoyVersionCheck({ adminUrl: `http://${fs.readFileSync(addr, 'utf8').trim()}`, log });
      await check.start();
      check.stop();
      expect(check.passthroughReason()).toBeUndefined();
      expect(check.envoyVersion).toMatchObject({ major: 1, minor: 40 });
      expect(logs.find((l) => l.msg === 'Envoy version checked')?.envoy_version).toMatch(/^1\.40\.\d+$/);
    });
  });
});

describe('EnvoyVersionCheck', () => {
  test('no ENVOY_ADMIN_URL: no check, nothing passed through', async () => {
    const check = new EnvoyVersionCheck({ adminUrl: undefined, log: capture().log });
    await check.start();
    expect(check.passthroughReason()).toBeUndefined();
  });

  test('too old: envoy-too-old, one warning, gauge 1', async () => {
    const admin = await fakeAdmin();
    admin.version = 'abc/1.36.2-dev/Clean/RELEASE/BoringSSL';
    const { log, logs } = capture();
    const metrics = new Metrics();
    const check = new EnvoyVersionCheck({ adminUrl: admin.url, log, registry: metrics.registry });
    try {
      await check.start();
      expect(check.passthroughReason()).toBe(ENVOY_TOO_OLD);
      const warn = logs.filter((l) => l.decision === 'ENVOY_TOO_OLD');
      expect(warn).toHaveLength(1);
      expect(warn[0]).toMatchObject({ level: 'warn', envoy_version: '1.36.2', min_envoy_version: '1.37.0' });
      expect(warn[0].msg).toMatch(/older than 1\.37\.0.*passed through/);
      expect(await metrics.render()).toMatch(/^continuation_gateway_envoy_too_old 1$/m);
    } finally {
      check.stop();
      await admin.close();
    }
  });

  test('not answering yet: envoy-version-unknown, retried until it answers, then nothing passed through', async () => {
    const admin = await fakeAdmin();
    const { log, logs } = capture();
    const metrics = new Metrics();
    const check = new EnvoyVersionCheck({ adminUrl: admin.url, log, registry: metrics.registry, retryMs: 50 });
    try {
      await check.start();
      expect(check.passthroughReason()).toBe(ENVOY_VERSION_UNKNOWN);
      expect(logs.filter((l) => l.decision === 'ENVOY_VERSION_UNKNOWN')).toHaveLength(1);
      admin.version = 'abc/1.37.1/Clean/RELEASE/BoringSSL';
      const t0 = Date.now();
      while (check.passthroughReason() !== undefined && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
      expect(check.passthroughReason()).toBeUndefined();
      expect(admin.hits).toBeGreaterThanOrEqual(2);
      expect(await metrics.render()).toMatch(/^continuation_gateway_envoy_too_old 0$/m);
    } finally {
      check.stop();
      await admin.close();
    }
  });

  test('stop() ends the retries', async () => {
    const admin = await fakeAdmin();
    const check = new EnvoyVersionCheck({ adminUrl: admin.url, log: capture().log, retryMs: 20 });
    try {
      await check.start();
      check.stop();
      const hits = admin.hits;
      await new Promise((r) => setTimeout(r, 150));
      expect(admin.hits).toBe(hits);
    } finally {
      await admin.close();
    }
  });
});

describe('RequestExchange: the scope decision with the version check', () => {
  class FakeStream {
    continued = false;
    echoed: string[] = [];
    continueRequest(): void {
      this.continued = true;
    }
    echoBody(b: Buffer): boolean {
      this.echoed.push(b.toString('utf8'));
      return true;
    }
    continueTrailers(): void {}
  }

  function exchange(reason: string | undefined, body: object) {
    const config = loadConfig({ DOWNSTREAM_URL: 'http://egress.test', CONTINUATION_MODEL: 'generic-test', LOG_LEVEL: 'silent' });
    const { log, logs } = capture();
    const streams = { active: 0 };
    const metrics = new Metrics();
    const ctx: GatewayContext = {
      config,
      log,
      upstream: { open: () => new Promise(() => undefined), close: async () => undefined } as any,
      admission: new AdmissionAuthority(admissionSettings(config), () => streams.active),
      streams,
      metrics,
      drain: { draining: false },
      inFlight: new Set(),
      envoyVersion: { passthroughReason: () => reason },
    };
    const stream = new FakeStream();
    const x = new RequestExchange(ctx, stream as any);
    x.onRequestHeaders(
      { ':path': '/v1/chat/completions', ':method': 'POST', 'content-type': 'application/json', 'x-request-id': 'rid' },
      false,
    );
    const raw = JSON.stringify(body);
    x.onRequestBody(Buffer.from(raw), true);
    return { x, stream, logs, metrics, raw };
  }
  const chat = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hello' }] };

  test.each([ENVOY_TOO_OLD, ENVOY_VERSION_UNKNOWN])('an in-scope request is passed through: %s', async (reason) => {
    const t = exchange(reason, chat);
    expect(t.stream.continued).toBe(true);
    expect(t.stream.echoed.join('')).toBe(t.raw);
    expect(t.logs.find((l) => l.decision === 'PASSTHROUGH')?.reason).toBe(reason);
    expect(await t.metrics.render()).toContain(`continuation_gateway_requests_total{scope="passthrough",reason="${reason}"} 1`);
  });

  test('an out-of-scope request keeps its own reason', () => {
    const t = exchange(ENVOY_TOO_OLD, { ...chat, stream: false });
    expect(t.stream.continued).toBe(true);
    expect(t.logs.find((l) => l.decision === 'PASSTHROUGH')?.reason).not.toBe(ENVOY_TOO_OLD);
  });

  test('a new enough Envoy: the request is originated', async () => {
    const t = exchange(undefined, chat);
    expect(t.stream.continued).toBe(false);
    expect(await t.metrics.render()).toContain('continuation_gateway_requests_total{scope="originated",reason=""} 1');
    t.x.onGone('test over');
  });
});
