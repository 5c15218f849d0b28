// Structured JSON logs (pino). One line per decision and one record at the end of every request, keyed by
// Envoy's x-request-id and the completion id the client sees. Prompt text, answer text and credentials are
// never passed to the logger; the redact list and boundRecord (identifiers checked, every string capped) are a
// second line of defence, not the first.
import fs = require('node:fs'); // the module object itself: boundedFlushSync swaps its writeSync for a moment

import pino, { type DestinationStream, type Logger } from 'pino';
import { boundError, boundRecord, identifierSerializers } from './log-values';

export type { Logger };

/** How long the exit-time flush keeps retrying writes that fail before it drops what is left. */
const EXIT_FLUSH_GIVE_UP_MS = 1000;

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { svc: 'continuation-gateway' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: ['authorization', 'headers.authorization', '*.authorization', 'api_key', 'messages', 'prompt', 'content', 'reasoning'],
        censor: '[redacted]',
      },
      // Every record and every child logger's bindings (request_id): no line is ever large or carries text.
      formatters: { level: (label) => ({ level: label }), log: boundRecord },
      serializers: { err: (e) => boundError(pino.stdSerializers.err(e)), ...identifierSerializers },
    },
    destination ?? stdoutDestination(),
  );
}

/**
 * Asynchronous stdout, flushed synchronously when the process exits (pino hooks process.exit for that). The
 * flush is bounded: sonic-boom 4's flushSync() retries a failed write forever, whatever the error, so with
 * stdout a pipe whose reader is gone (EPIPE: the stack or supervisor that read it was killed) process.exit()
 * never returned and the process, stuck in a synchronous loop, ignored SIGTERM for good.
 */
function stdoutDestination(): DestinationStream {
  const dest = pino.destination({ dest: 1, sync: false });
  const flushSync = dest.flushSync.bind(dest);
  dest.flushSync = () => boundedFlushSync(flushSync);
  return dest;
}

/**
 * Runs flushSync, dropping what cannot be written: at once after an error that will not go away (EPIPE, EBADF),
 * after EXIT_FLUSH_GIVE_UP_MS of a full pipe (EAGAIN: a reader that does not read).
 */
export function boundedFlushSync(flushSync: () => void): void {
  const writable = fs as { writeSync: typeof fs.writeSync };
  const writeSync = fs.writeSync;
  let broken = false;
  let fullSince: number | undefined;
  writable.writeSync = ((fd: number, data: string | NodeJS.ArrayBufferView, ...rest: unknown[]) => {
    const dropped = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
    if (broken || (fullSince !== undefined && Date.now() - fullSince >= EXIT_FLUSH_GIVE_UP_MS)) return dropped;
    try {
      return (writeSync as (...a: unknown[]) => number)(fd, data, ...rest);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'EAGAIN' && code !== 'EBUSY') {
        broken = true;
        return dropped; // reported written: sonic-boom's loop moves on instead of retrying
      }
      fullSince ??= Date.now();
      throw e; // sonic-boom waits 100 ms and retries
    }
  }) as typeof fs.writeSync;
  try {
    flushSync();
  } finally {
    writable.writeSync = writeSync;
  }
}
