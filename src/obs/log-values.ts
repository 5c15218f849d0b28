// What a log record may carry of a value that came from a client or an engine: bounded, typed, never text.
// Call sites pass request values through these (smallInt, jsonType); boundRecord is applied by the logger to
// every record as a second line of defence (a field that is an identifier, everything else length-capped), so
// no value can make a line large or carry a prompt, whatever a call site passes.

/** Longest string value a record keeps; longer ones are cut, with the length they had. */
export const MAX_LOG_STRING = 256;
/** Longest identifier (request id, completion id, model, replica, revision) logged as it is. */
export const MAX_LOG_IDENTIFIER = 128;
/** Array items and object keys kept per level, and the levels kept below the record. */
const MAX_LOG_ITEMS = 32;
const MAX_LOG_DEPTH = 3;

export type JsonType = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object' | 'undefined';

/** A value's JSON type: what a log says of a request field instead of its content. */
export function jsonType(v: unknown): JsonType {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  const t = typeof v;
  if (t === 'boolean' || t === 'number' || t === 'string' || t === 'undefined') return t;
  return 'object';
}

/** The value when it is an integer within ±max, else its JSON type in angle brackets (`<string>`). */
export function smallInt(v: unknown, max = 1_000_000): string {
  return typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= max ? String(v) : `<${jsonType(v)}>`;
}

/** Ids and names as systems make them (UUIDs, `chatcmpl-…`, `Qwen/Qwen3-32B`, `127.0.0.1:8000`, `fp_…`). */
const IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9._:/@+=~-]*$/;
const PLACEHOLDER = /^<(string \d+|[a-z]+)>$/;
/** What an identifier longer than MAX_LOG_IDENTIFIER becomes: its head, then the marker with its length. */
const CUT_IDENTIFIER = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:/@+=~-]{0,${MAX_LOG_IDENTIFIER - 1}}\\.\\.\\.\\[cut \\d+\\]$`);

/**
 * An identifier as it is when it looks like one (the set above: no spaces, quotes or control characters, so no
 * sentence and no injected line), cut after MAX_LOG_IDENTIFIER characters with the cut visible
 * (`req-aaaa...[cut 10240]`: a 10 KB X-Request-Id still greps by its head, issue 39); else what it was
 * (`<string 6012>`).
 */
export function identifier(v: unknown): unknown {
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return v;
  if (typeof v !== 'string') return `<${jsonType(v)}>`;
  // Placeholders and cut identifiers pass unchanged: the logger applies this twice (to the record, then as
  // pino's serializer).
  if (PLACEHOLDER.test(v) || (v.length <= MAX_LOG_IDENTIFIER + 24 && CUT_IDENTIFIER.test(v))) return v;
  if (!IDENTIFIER.test(v)) return `<string ${v.length}>`;
  return v.length <= MAX_LOG_IDENTIFIER ? v : `${v.slice(0, MAX_LOG_IDENTIFIER)}...[cut ${v.length}]`;
}

/** Fields of a record that name something a client or an engine chose; they are logged only as identifiers. */
export const IDENTIFIER_FIELDS: ReadonlySet<string> = new Set([
  'request_id',
  'completion_id',
  'model',
  'replica',
  'model_revision',
  'leg2_model_revision',
  'served_as',
]);

/**
 * pino serializers for the identifier fields: they apply to a child logger's bindings (`request_id`), which
 * pino's formatters never see.
 */
export const identifierSerializers: Record<string, (v: unknown) => unknown> = Object.fromEntries(
  [...IDENTIFIER_FIELDS].map((f) => [f, identifier]),
);

/** Longest stack an error record keeps (a bug's stack is what makes it fixable; a RangeError's is endless). */
const MAX_LOG_STACK = 4096;

/** pino's serialized error with its message capped (V8 messages can quote input) and its stack bounded. */
export function boundError(e: Record<string, unknown>): Record<string, unknown> {
  const out = boundObject(e, 1);
  if (typeof e.stack === 'string') {
    // The stack opens with the whole message: that part as capped as the message itself.
    const head = `${String(e.type)}: ${String(e.message)}`;
    const stack = e.stack.startsWith(head) ? `${String(e.type)}: ${String(out.message)}${e.stack.slice(head.length)}` : e.stack;
    out.stack = stack.length <= MAX_LOG_STACK ? stack : `${stack.slice(0, MAX_LOG_STACK)}…`;
  }
  return out;
}

/** A string cut to MAX_LOG_STRING characters, saying how long it was. */
function capString(s: string): string {
  return s.length <= MAX_LOG_STRING ? s : `${s.slice(0, MAX_LOG_STRING)}…(${s.length} chars)`;
}

function bound(v: unknown, depth: number): unknown {
  if (typeof v === 'string') return capString(v);
  if (v === null || typeof v !== 'object' || v instanceof Error) return v; // errors: pino's serializer, own stacks
  if (depth >= MAX_LOG_DEPTH) return `<${jsonType(v)}>`;
  if (Array.isArray(v)) {
    const items = v.slice(0, MAX_LOG_ITEMS).map((x) => bound(x, depth + 1));
    if (v.length > MAX_LOG_ITEMS) items.push(`…(${v.length} items)`);
    return items;
  }
  return boundObject(v as Record<string, unknown>, depth + 1);
}

function boundObject(o: Record<string, unknown>, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let n = 0;
  for (const key of Object.keys(o)) {
    if (n++ === MAX_LOG_ITEMS) {
      out['…'] = `${Object.keys(o).length} keys`;
      break;
    }
    const v = o[key];
    out[capString(key)] = depth === 0 && IDENTIFIER_FIELDS.has(key) ? identifier(v) : bound(v, depth);
  }
  return out;
}

/** The record as the logger writes it: identifier fields checked, strings capped, nesting and breadth bounded. */
export function boundRecord(record: Record<string, unknown>): Record<string, unknown> {
  return boundObject(record, 0);
}
