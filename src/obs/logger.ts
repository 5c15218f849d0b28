// Structured JSON logs (pino). One line per decision and one record at the end of every request, keyed by
// Envoy's x-request-id and the completion id the client sees. Prompt text, answer text and credentials are
// never passed to the logger; the redact list is a second line of defence, not the first.
import pino, { type Logger, type DestinationStream } from 'pino';

export type { Logger };

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
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
