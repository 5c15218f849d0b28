// Python's str.strip / lstrip / rstrip for the templates @huggingface/jinja renders. Its 0.5.13 string methods
// ignore the characters argument and strip JavaScript's whitespace (dist/index.cjs, StringValue builtins
// `strip` / `lstrip` / `rstrip`: `this.value.trim()`), where the engines' Jinja (Python) strips exactly the
// characters given, or Python's whitespace. Templates depend on it: MiniMax-M2's
// `content.split('</think>')[-1].strip('\n')` keeps a trailing space that JavaScript's trim() drops, which moves
// transformers' continue_final_message cut (test/unit/templates/renderer.test.ts renders such cases through both).
//
// Its `trim` filter (Interpreter.applyFilter, `operand.value.trim()`) strips JavaScript's whitespace too, not
// Python's (U+0085 and U+001C-U+001F are Python whitespace, U+FEFF is not).
//
// The methods are replaced on the library's string value class, reached through a value it creates: the
// class is not exported; the filter by wrapping the exported Interpreter's applyFilter. Applied once, when this
// module is loaded (by src/templates/renderer.ts).
import { Environment, Interpreter } from '@huggingface/jinja';

/** Python's str.isspace() characters (what str.strip() removes without an argument). */
const PY_WHITESPACE = new Set(
  ' \t\n\r\u000b\u000c\u001c\u001d\u001e\u001f\u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000'
    .split('')
    .concat(Array.from({ length: 11 }, (_, i) => String.fromCharCode(0x2000 + i))),
);

export function pyStrip(s: string, chars: string | null | undefined, left: boolean, right: boolean): string {
  const strip = chars === undefined || chars === null ? (c: string) => PY_WHITESPACE.has(c) : (c: string) => chars.includes(c);
  const cs = Array.from(s);
  let start = 0;
  let end = cs.length;
  if (left) while (start < end && strip(cs[start])) start++;
  if (right) while (end > start && strip(cs[end - 1])) end--;
  return cs.slice(start, end).join('');
}

interface RuntimeValue {
  value: unknown;
}
type RuntimeCtor = new (value: unknown) => RuntimeValue;

let applied = false;

export function usePythonStripping(): void {
  if (applied) return;
  const env = new Environment();
  env.set('s', '');
  env.set('f', () => null);
  const sample = env.lookupVariable('s') as unknown as RuntimeValue;
  const fn = env.lookupVariable('f') as unknown as RuntimeValue;
  const proto = Object.getPrototypeOf(sample) as object;
  const StringValue = sample.constructor as RuntimeCtor;
  const FunctionValue = fn.constructor as RuntimeCtor;
  const original = Object.getOwnPropertyDescriptor(proto, 'builtins');
  if (!original?.get) throw new Error('@huggingface/jinja: string values have no builtins getter (another version?)');
  const patched = new WeakSet<object>();
  Object.defineProperty(proto, 'builtins', {
    configurable: true,
    get(this: RuntimeValue) {
      const map = original.get?.call(this) as Map<string, unknown>;
      if (!patched.has(map)) {
        const method = (left: boolean, right: boolean) =>
          new FunctionValue((args: RuntimeValue[]) => {
            const chars = args[0]?.value;
            return new StringValue(pyStrip(String(this.value), typeof chars === 'string' ? chars : null, left, right));
          });
        map.set('strip', method(true, true));
        map.set('lstrip', method(true, false));
        map.set('rstrip', method(false, true));
        patched.add(map);
      }
      return map;
    },
  });
  type ApplyFilter = (this: unknown, operand: RuntimeValue, filterNode: unknown, environment: unknown) => unknown;
  const proto2 = Interpreter.prototype as unknown as { applyFilter: ApplyFilter };
  const applyFilter = proto2.applyFilter;
  if (typeof applyFilter !== 'function') throw new Error('@huggingface/jinja: Interpreter has no applyFilter (another version?)');
  proto2.applyFilter = function (operand, filterNode, environment) {
    const node = filterNode as { type?: string; value?: unknown };
    if (node.type === 'Identifier' && node.value === 'trim' && operand.constructor === StringValue)
      return new StringValue(pyStrip(String(operand.value), null, true, true));
    return applyFilter.call(this, operand, filterNode, environment);
  };
  applied = true;
}
