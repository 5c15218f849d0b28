// An engine that closes idle keep-alive connections after a few milliseconds: an HTTP front whose server
// keep-alive timeout is `idleMs`, relaying every request to a fake engine behind it (request and response
// streamed through, a reset of the engine's response becomes a reset of this one). Uvicorn, cpp-httplib and
// Node close an idle connection after 2-5 s; this one does the same, only soon enough that Envoy regularly
// sends a leg on a connection that the engine is closing at that moment (RFC 9112 section 9.3.1's race).
import * as http from 'node:http';
import type * as net from 'node:net';

export interface IdleClosingEngine {
  port: number;
  /** Connections accepted, and closed by the keep-alive timer (idle, not during a response). */
  stats: { connections: number; idleCloses: number; requests: number };
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'te', 'trailer']);

export async function startIdleClosingEngine(targetPort: number, idleMs: number): Promise<IdleClosingEngine> {
  const stats = { connections: 0, idleCloses: 0, requests: 0 };
  const agent = new http.Agent({ keepAlive: true });
  const idleTimers = new Map<net.Socket, NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    stats.requests++;
    clearTimeout(idleTimers.get(req.socket));
    idleTimers.delete(req.socket);
    // The engine's keep-alive timer: idleMs after the response is written, an idle connection is closed.
    res.on('finish', () => {
      const sock = req.socket;
      if (sock.destroyed) return;
      idleTimers.set(
        sock,
        setTimeout(() => {
          idleTimers.delete(sock);
          stats.idleCloses++;
          sock.destroy();
        }, idleMs),
      );
    });
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !HOP_BY_HOP.has(k)));
    const up = http.request({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers, agent }, (ur) => {
      const out = Object.fromEntries(Object.entries(ur.headers).filter(([k]) => !HOP_BY_HOP.has(k)));
      res.writeHead(ur.statusCode ?? 502, out as http.OutgoingHttpHeaders);
      ur.on('data', (d) => res.write(d));
      ur.on('end', () => res.end());
      ur.on('aborted', () => res.destroy());
      ur.on('error', () => res.destroy());
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
  });
  // Not Node's own keep-alive timer: Node adds a 1000 ms buffer to it (hard-coded in Node 20.20, measured: a
  // socket with keepAliveTimeout 3 timed out after 1003 ms; keepAliveTimeoutBuffer in Node 24), so it cannot
  // close after a few milliseconds. The timer above does.
  server.keepAliveTimeout = 0;
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    stats.connections++;
    sockets.add(s);
    s.on('close', () => {
      sockets.delete(s);
      clearTimeout(idleTimers.get(s));
      idleTimers.delete(s);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    stats,
    async close() {
      for (const t of idleTimers.values()) clearTimeout(t);
      for (const s of sockets) s.destroy();
      agent.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
