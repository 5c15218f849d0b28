// Free-port helper for the stack runner and the tests.
import * as net from 'node:net';

/**
 * Returns a TCP port that was free on 127.0.0.1 a moment ago: listen on port 0, read the port the kernel chose,
 * close. There is an unavoidable race (another process may take the port before the caller binds it); callers
 * bind soon after, and the kernel hands out ephemeral ports round-robin, so a collision is very unlikely.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen({ port: 0, host, exclusive: true }, () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('freePort: could not read the bound address'));
        return;
      }
      const { port } = addr;
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/** Returns `n` distinct free ports (allocated one after another, all held open until every one is known). */
export async function freePorts(n: number, host = '127.0.0.1'): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const srv = net.createServer();
      srv.unref();
      servers.push(srv);
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen({ port: 0, host, exclusive: true }, () => resolve());
      });
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') throw new Error('freePorts: could not read the bound address');
      ports.push(addr.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}

/** True when something accepts TCP connections on host:port. */
export function isPortOpen(port: number, host = '127.0.0.1', timeoutMs = 1000): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const sock = net.connect({ port, host });
    const done = (ok: boolean): void => {
      sock.removeAllListeners();
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}
