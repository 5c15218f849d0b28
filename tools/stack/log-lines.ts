// How `npm run stack` / `npm run demo` writes its own and its children's lines to stderr. On a terminal:
// `[sidecar] {...}`, `[envoy] ...`, easy to read. Otherwise (piped to jq, a file, a log shipper): one JSON
// object per line, each with the `source` it came from: a child's JSON record keeps its fields, any other line
// becomes {"source","time","msg"}. STACK_LOG_FORMAT=json|prefixed overrides the choice.

export type StackLogFormat = 'json' | 'prefixed';

export function stackLogFormat(setting: string | undefined, stderrIsTty: boolean): StackLogFormat {
  const v = setting?.trim().toLowerCase();
  if (v === 'json' || v === 'prefixed') return v;
  return stderrIsTty ? 'prefixed' : 'json';
}

/** One line of output from `source` (stack, sidecar, envoy, replica-a, ...), newline included. */
export function formatLine(format: StackLogFormat, source: string, text: string, now = new Date()): string {
  if (format === 'prefixed') return `[${source}] ${text}\n`;
  const trimmed = text.trim();
  if (trimmed.startsWith('{') && trimmed.endsWith('}')) {
    try {
      const record = JSON.parse(trimmed);
      if (record && typeof record === 'object' && !Array.isArray(record) && !('source' in record))
        return `${JSON.stringify({ source, ...record })}\n`;
    } catch {
      // not JSON after all: wrapped below
    }
  }
  return `${JSON.stringify({ source, time: now.toISOString(), msg: text })}\n`;
}
