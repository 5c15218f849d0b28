// The settings `npm run stack` reads from its environment (its own; the sidecar's are src/config/env.ts).
import type { UpstreamHost } from './envoy-config';
import type { EnvoyTracingOptions } from './envoy-tracing';

/** A bad stack setting: printed as one line, exit 2. */
export class StackError extends Error {}

export function envNumber(env: NodeJS.ProcessEnv, name: string, def: number, opts: { int?: boolean; min?: number } = {}): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || (opts.int && !Number.isInteger(n)) || (opts.min !== undefined && n < opts.min)) {
    throw new StackError(
      `${name} must be ${opts.int ? 'an integer' : 'a number'}${opts.min !== undefined ? ` >= ${opts.min}` : ''}, got ${JSON.stringify(raw)}`,
    );
  }
  return n;
}

/** Parses DOWNSTREAM_URL / CONTINUATION_URL: `http://host:port[,http://host2:port2...]`. */
export function parseTierUrls(name: string, value: string): UpstreamHost[] {
  const hosts: UpstreamHost[] = [];
  for (const raw of value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new StackError(`${name}: ${JSON.stringify(raw)} is not a URL (expected http://host:port)`);
    }
    if (u.protocol !== 'http:') {
      throw new StackError(`${name}: ${JSON.stringify(raw)}: only http:// is supported (Envoy talks plain HTTP/1.1 to the router tier)`);
    }
    if (u.pathname !== '/' && u.pathname !== '') {
      throw new StackError(`${name}: ${JSON.stringify(raw)}: a path prefix is not supported (Envoy forwards the client's path as is)`);
    }
    if (u.username || u.password || u.search || u.hash) {
      throw new StackError(`${name}: ${JSON.stringify(raw)}: credentials, query or fragment are not supported`);
    }
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    hosts.push({ host, port: u.port ? Number(u.port) : 80 });
  }
  if (hosts.length === 0) throw new StackError(`${name} is empty`);
  return hosts;
}

/** ENVOY_OTLP_ENDPOINT=http://host:port: the collector Envoy's tracer reports to (undefined: no tracer). */
export function envoyTracingFrom(value: string | undefined): EnvoyTracingOptions | undefined {
  if (!value?.trim()) return undefined;
  let u: URL;
  try {
    u = new URL(value.trim());
  } catch {
    throw new StackError(`ENVOY_OTLP_ENDPOINT must be an http://host:port URL, got ${JSON.stringify(value)}`);
  }
  if (u.protocol !== 'http:' || (u.pathname !== '/' && u.pathname !== ''))
    throw new StackError(`ENVOY_OTLP_ENDPOINT must be an http://host:port URL (OTLP/HTTP, no path), got ${JSON.stringify(value)}`);
  return { collectorHost: u.hostname, collectorPort: Number(u.port || 80) };
}
