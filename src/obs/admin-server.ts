// The HTTP admin server (node:http) on ADMIN_PORT: GET /healthz (liveness: the process answers; never touches
// the upstream), GET /readyz (200 once the ext_proc server listens with a valid configuration, 503 while it
// drains or before), GET /metrics (Prometheus text format).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Anything that renders Prometheus text: one sidecar's Metrics, or the cluster primary's aggregate. */
export interface MetricsSource {
  readonly contentType: string;
  render(): Promise<string>;
}

export interface AdminServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startAdminServer(o: {
  host: string;
  port: number;
  metrics: MetricsSource;
  ready: () => boolean;
}): Promise<AdminServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (path === '/readyz') {
      const ready = o.ready();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ready' : 'not ready');
      return;
    }
    if (path === '/metrics') {
      o.metrics.render().then(
        (body) => res.writeHead(200, { 'content-type': o.metrics.contentType }).end(body),
        (e: unknown) =>
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${e instanceof Error ? e.message : String(e)}\n`),
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
