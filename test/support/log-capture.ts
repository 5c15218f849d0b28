// Captures the sidecar's JSON log lines in memory so tests can assert the decisions it logged.
import { Writable } from 'node:stream';

export interface LogCapture {
  /** A pino destination. */
  readonly sink: Writable;
  readonly logs: any[];
  /** Records whose fields equal all of `filter` (e.g. { request_id, decision: 'TRIGGERED' }). */
  records(filter: Record<string, unknown>): any[];
  /** Waits until the request_end record of a request exists. */
  waitForEnd(requestId: string, timeoutMs?: number): Promise<any>;
}

export function captureLogs(): LogCapture {
  const logs: any[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line.trim()) logs.push(JSON.parse(line));
      cb();
    },
  });
  return {
    sink,
    logs,
    records: (filter) => logs.filter((r) => Object.entries(filter).every(([k, v]) => r[k] === v)),
    async waitForEnd(requestId, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const r = logs.find((l) => l.event === 'request_end' && l.request_id === requestId);
        if (r) return r;
        if (Date.now() > until) throw new Error(`no request_end record for ${requestId}`);
        await new Promise((res) => setTimeout(res, 20));
      }
    },
  };
}
