// How `npm run stack` / `npm run demo` writes its own and its children's lines to stderr. On a terminal:
// `[sidecar] {...}`, `[envoy] ...`, easy to read. Otherwise (piped to jq, a file, a log shipper): one JSON
// object per line, each naming the `process` it came from (stack, sidecar, envoy, replica-a, ...). A child's
// JSON record keeps every field of its own beside it (the sidecar's records carry no `process`; ATTEMPT's
// `source` is leg 2's design source, not ours); a record that did carry `process` comes whole under
// `record`, and any other line becomes {"process","time","msg"}. STACK_LOG_FORMAT=json|prefixed overrides the choice.

export type StackLogFormat = 'json' | 'prefixed';

/** The field the stack adds to every JSON line: which process wrote it. */
export const PROCESS_FIELD = 'process';

export function stackLogFormat(setting: string | undefined, stderrIsTty: boolean): StackLogFormat {
  const v = setting?.trim().toLowerCase();
  if (v === 'json' || v === 'prefixed') return v;
  return stderrIsTty ? 'prefixed' : 'json';
}

/** A JSON object (not an array, not a scalar), or undefined. */
function jsonObject(text: string): Record<string, unknown> | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{') || !trimmed.endsWith('}')) return undefined;
  try {
    const record: unknown = JSON.parse(trimmed);
    return record && typeof record === 'object' && !Array.isArray(record) ? (record as Record<string, unknown>) : undefined;
  } catch {
    return undefined; // not JSON after all: wrapped as a message
  }
}

/** One line of output from `from` (stack, sidecar, envoy, replica-a, ...), newline included. */
export function formatLine(format: StackLogFormat, from: string, text: string, now = new Date()): string {
  if (format === 'prefixed') return `[${from}] ${text}\n`;
  const record = jsonObject(text);
  if (record && !(PROCESS_FIELD in record)) return `${JSON.stringify({ [PROCESS_FIELD]: from, ...record })}\n`;
  if (record) return `${JSON.stringify({ [PROCESS_FIELD]: from, time: now.toISOString(), record })}\n`;
  return `${JSON.stringify({ [PROCESS_FIELD]: from, time: now.toISOString(), msg: text })}\n`;
}
