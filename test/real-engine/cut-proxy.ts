// A TCP proxy in front of one real llama-server that cuts a chat stream after its k-th text-bearing event, as a
// replica that dies there: the bytes of the first k events reach Envoy, then both sockets are reset (the engine
// sees its client go and stops that generation; it stays up to serve the next leg). The cut is asked per
// request by its x-request-id, `cut<k>.<anything>` exactly (a continuation leg's `-c1` suffix is never cut).
// It lets a test cut at every token of a real answer without killing and reloading the server each time.
import * as net from 'node:net';

const CUT_ID = /x-request-id:\s*cut(\d+)\.([A-Za-z0-9]+)\r\n/i;
/** A text delta of llama-server's chat stream (server-task.cpp to_json_oaicompat_chat). */
const TEXT_EVENT = /"delta":\{"(content|reasoning_content)":"/;

export interface CutProxy {
  readonly port: number;
  /** The JSON bodies of the POST /completion requests that came through (a continuation leg by ids). */
  readonly completions: Array<{ requestId: string; body: any }>;
  close(): Promise<void>;
}

export function startCutProxy(targetPort: number): Promise<CutProxy> {
  const sockets = new Set<net.Socket>();
  const completions: CutProxy['completions'] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    let cutAfter: number | null = null;
    let seen = 0;
    let pending = '';
    let captured: string | null = null;
    const cut = () => {
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    };
    client.on('data', (b: Buffer) => {
      const text = b.toString('latin1');
      if (text.startsWith('POST /completion ')) captured = text;
      else if (captured !== null) captured += text;
      if (captured !== null) {
        // The leg's head and body, kept until Content-Length bytes of body are in.
        const head = captured.indexOf('\r\n\r\n');
        const length = Number(/content-length:\s*(\d+)/i.exec(captured)?.[1] ?? -1);
        const body = head >= 0 ? Buffer.from(captured.slice(head + 4), 'latin1') : null;
        if (body && length >= 0 && body.length >= length) {
          const requestId = /x-request-id:\s*(\S+)\r\n/i.exec(captured)?.[1] ?? '';
          completions.push({ requestId, body: JSON.parse(body.subarray(0, length).toString('utf8')) });
          captured = null;
        }
      }
      if (text.startsWith('POST /v1/chat/completions')) {
        const m = CUT_ID.exec(text);
        cutAfter = m ? Number(m[1]) : null;
        seen = 0;
        pending = '';
      }
      upstream.write(b);
    });
    upstream.on('data', (b: Buffer) => {
      if (cutAfter === null) return void client.write(b);
      // Whole events only: pass each complete one on, and stop right after the k-th text event.
      pending += b.toString('latin1');
      let out = '';
      for (let end = pending.indexOf('\n\n'); end >= 0; end = pending.indexOf('\n\n')) {
        const event = pending.slice(0, end + 2);
        pending = pending.slice(end + 2);
        out += event;
        if (TEXT_EVENT.test(event) && ++seen === cutAfter) {
          client.write(Buffer.from(out, 'latin1'), () => setTimeout(cut, 20));
          cutAfter = null;
          pending = '';
          upstream.pause();
          return;
        }
      }
      if (out) client.write(Buffer.from(out, 'latin1'));
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        completions,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}
