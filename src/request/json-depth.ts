// How deeply a raw JSON body nests, found by one iterative pass over its bytes, before anything parses it.
// JSON.parse itself copes with any depth, but much of what runs on the parsed payload recurses (JSON.stringify
// of leg 2's body and structuredClone throw a RangeError from about 5,000 levels on Node 20; zod and the
// request walkers recurse too), so a body deeper than the limit must never become a payload at all.
//
// Only the structure matters: brackets inside strings do not count, and escapes are skipped. UTF-8 never
// puts an ASCII byte inside a multi-byte character, so scanning bytes is exact. Invalid JSON may give a
// meaningless depth; it is out of scope either way (JSON.parse refuses it, or the depth does).

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * True when some array or object in `raw` is nested more than `maxDepth` levels deep (`[]` is depth 1,
 * `{"a":[1]}` depth 2). Stops at the first byte past the limit: the cost is bounded by the body's size.
 */
export function exceedsJsonDepth(raw: Uint8Array, maxDepth: number): boolean {
  let depth = 0;
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i];
    if (b === QUOTE) i = stringEnd(raw, i);
    else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > maxDepth) return true;
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) depth--;
  }
  return false;
}

/** Index of the quote closing the string opened at `open` (the last index if none): prompts are long strings. */
function stringEnd(raw: Uint8Array, open: number): number {
  let at = open;
  for (;;) {
    at = raw.indexOf(QUOTE, at + 1); // native: much faster than a byte loop over the text
    if (at < 0) return raw.length;
    let backslashes = 0;
    while (raw[at - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at; // an odd count escapes this quote
  }
}
