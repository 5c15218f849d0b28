// Every decision record a request logs becomes an event on its span: logTransition()'s (ATTEMPT, RETRY,
// FIRST_DELTA = the commit point, TRIGGERED, SUCCEEDED) and the ones the core logs directly (SKIPPED,
// RECOVERY_REFUSED, RECOVERY_ADMITTED, FAILED, PASSTHROUGH_FAILURE, TOKENIZE_FALLBACK, ...), so that a trace
// shows each recovery decision without a second call beside every log line. The event's attributes are the
// allow-listed fields (tracing-attributes.ts), never the record itself.
import type { Logger } from './logger';
import type { RequestTrace } from './tracing';

const LEVELS = new Set<PropertyKey>(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);

/** `log`, unchanged without tracing; with it, a logger whose records with a `decision` also reach the span. */
export function withDecisionEvents(log: Logger, trace: RequestTrace, tracing: boolean): Logger {
  if (!tracing) return log;
  return new Proxy(log, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      if (!LEVELS.has(prop)) return value.bind(target);
      return (obj: unknown, ...rest: unknown[]) => {
        if (obj !== null && typeof obj === 'object' && typeof (obj as { decision?: unknown }).decision === 'string') {
          const record = obj as Record<string, unknown>;
          trace.decision(record.decision as string, record);
        }
        return value.apply(target, [obj, ...rest]);
      };
    },
  });
}
