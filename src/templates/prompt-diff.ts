// Where two prompts part: offsets and lengths only. What differed is logged as numbers, never as text (a prompt
// is the client's).

export interface PromptDiff {
  /** The first offset (UTF-16 code units) where they differ. */
  readonly at: number;
  readonly expectedLength: number;
  readonly actualLength: number;
}

/** Undefined when equal. */
export function promptDiff(expected: string, actual: string): PromptDiff | undefined {
  if (expected === actual) return undefined;
  const n = Math.min(expected.length, actual.length);
  let at = 0;
  while (at < n && expected.charCodeAt(at) === actual.charCodeAt(at)) at++;
  return { at, expectedLength: expected.length, actualLength: actual.length };
}
