// The Envoy in front of the sidecar must be >= 1.37: the sidecar originates its answers with ext_proc's
// StreamedImmediateResponse, which older Envoys do not have, so on an older proxy every in-scope request would
// fail. The shipped standalone deployments pin Envoy 1.40; a mesh brings its own proxy (istio-proxy: Istio >= 1.29
// ships Envoy 1.37, docs/deploy.md). With ENVOY_ADMIN_URL set (istio-proxy: http://127.0.0.1:15000), the sidecar
// reads that Envoy's version from the admin interface's GET /server_info at start, and until it knows the version
// to be new enough it hands in-scope requests back to Envoy (CONTINUE: plain proxying, the gateway absent):
//   - too old: passthrough reason `envoy-too-old`, one warning, gauge continuation_gateway_envoy_too_old 1;
//   - not known yet (admin not answering, retried every second): passthrough reason `envoy-version-unknown`.
// Unset ENVOY_ADMIN_URL: no check (the standalone deployments ship their own Envoy).
import * as http from 'node:http';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../obs/logger';

export const MIN_ENVOY_VERSION: readonly [number, number, number] = [1, 37, 0];
export const ENVOY_TOO_OLD = 'envoy-too-old';
export const ENVOY_VERSION_UNKNOWN = 'envoy-version-unknown';

export interface EnvoyVersion {
  major: number;
  minor: number;
  patch: number;
  /** The version field as Envoy reported it. */
  text: string;
}

/**
 * The version from /server_info's JSON: `version` is "<commit>/<x.y.z[-suffix]>/<Clean|Modified>/<RELEASE|DEBUG>/
 * <TLS library>" (istio-proxy: e.g. "<sha>/1.37.2-dev/Clean/RELEASE/BoringSSL").
 */
export function parseEnvoyVersion(serverInfo: unknown): EnvoyVersion | undefined {
  const text = (serverInfo as { version?: unknown } | null)?.version;
  if (typeof text !== 'string') return undefined;
  const m = /(?:^|\/)(\d+)\.(\d+)\.(\d+)(?:[-+][\w.-]*)?(?:\/|$)/.exec(text);
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), text };
}

export function isOlderThan(v: EnvoyVersion, min: readonly [number, number, number] = MIN_ENVOY_VERSION): boolean {
  const a = [v.major, v.minor, v.patch];
  for (let i = 0; i < 3; i++) if (a[i] !== min[i]) return a[i] < min[i];
  return false;
}

function getJson(url: string, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
        try {
          resolve(JSON.parse(body));
        } catch {
          reject(new Error('not JSON'));
        }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

export interface EnvoyVersionCheckOptions {
  /** Envoy's admin interface (ENVOY_ADMIN_URL); undefined = no check, every request may be originated. */
  adminUrl: string | undefined;
  log: Logger;
  /** Where continuation_gateway_envoy_too_old goes (the sidecar's registry). */
  registry?: Registry;
  retryMs?: number;
  timeoutMs?: number;
}

/** The startup check; RequestExchange asks passthroughReason() for every in-scope request. */
export class EnvoyVersionCheck {
  private state: 'unchecked' | 'unknown' | 'ok' | 'too-old';
  private version: EnvoyVersion | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failures = 0;

  constructor(private readonly opts: EnvoyVersionCheckOptions) {
    this.state = opts.adminUrl ? 'unknown' : 'unchecked';
    if (opts.registry) {
      const self = this;
      new Gauge({
        name: 'continuation_gateway_envoy_too_old',
        help: 'Whether the Envoy at ENVOY_ADMIN_URL is older than 1.37 (1: in-scope requests are passed through), 0 otherwise.',
        registers: [opts.registry],
        aggregator: 'max',
        collect() {
          this.set(self.state === 'too-old' ? 1 : 0);
        },
      });
    }
  }

  /** undefined: the request may be originated; else the passthrough reason. */
  passthroughReason(): string | undefined {
    if (this.state === 'too-old') return ENVOY_TOO_OLD;
    if (this.state === 'unknown') return ENVOY_VERSION_UNKNOWN;
    return undefined;
  }

  get envoyVersion(): EnvoyVersion | undefined {
    return this.version;
  }

  /** Asks once and resolves; while the answer is missing, asks again every retryMs in the background. */
  async start(): Promise<void> {
    if (this.state !== 'unknown') return;
    await this.attempt();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private async attempt(): Promise<void> {
    const url = `${this.opts.adminUrl}/server_info`;
    const { log } = this.opts;
    try {
      const info = await getJson(url, this.opts.timeoutMs ?? 2000);
      const v = parseEnvoyVersion(info);
      if (!v) throw new Error('no x.y.z version in its "version" field');
      this.version = v;
      const min = MIN_ENVOY_VERSION.join('.');
      if (isOlderThan(v)) {
        this.state = 'too-old';
        log.warn(
          {
            decision: 'ENVOY_TOO_OLD',
            envoy_version: `${v.major}.${v.minor}.${v.patch}`,
            envoy_build: v.text,
            min_envoy_version: min,
            envoy_admin_url: this.opts.adminUrl,
          },
          `Envoy ${v.major}.${v.minor}.${v.patch} is older than ${min} (no ext_proc StreamedImmediateResponse): every request is passed through, continuation is OFF (reason ${ENVOY_TOO_OLD}); Istio needs >= 1.29`,
        );
      } else {
        this.state = 'ok';
        log.info(
          { envoy_version: `${v.major}.${v.minor}.${v.patch}`, envoy_build: v.text, min_envoy_version: min },
          'Envoy version checked',
        );
      }
    } catch (e) {
      if (this.stopped) return;
      this.failures++;
      // The first failure and then one line a minute: the check goes on until the admin interface answers.
      if (this.failures === 1 || this.failures % 60 === 0) {
        log.warn(
          {
            decision: 'ENVOY_VERSION_UNKNOWN',
            envoy_admin_url: this.opts.adminUrl,
            attempts: this.failures,
            error: e instanceof Error ? e.message : String(e),
          },
          `cannot read Envoy's version from ${url}: in-scope requests are passed through (reason ${ENVOY_VERSION_UNKNOWN}) until it answers`,
        );
      }
      if (!this.stopped) {
        this.timer = setTimeout(() => void this.attempt(), this.opts.retryMs ?? 1000);
        this.timer.unref();
      }
    }
  }
}
