// A misspelled variable (CONTINUATION_MODLE) is otherwise ignored without a word: the default applies and the
// gateway may silently do nothing. Pure: given the environment's names and the known ones, the near misses.
// Only names that look like ours are considered, so the machine's own variables (HOME, PATH, HOSTNAME, npm_*)
// never warn: upper case with an underscore, and the same first word as the known name, or a first word that is
// itself a near miss of a long first word of ours (CONTINUATON_MODEL).

/** Edit distance with adjacent transpositions (optimal string alignment): MODLE -> MODEL is 1. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.length][b.length];
}

export interface NearMiss {
  /** The variable set in the environment, which the sidecar does not read. */
  variable: string;
  /** The known variable it is closest to. */
  didYouMean: string;
}

const MAX_DISTANCE = 2;
const firstWord = (n: string) => n.split('_')[0];

function looksRelated(name: string, known: string): boolean {
  const [a, b] = [firstWord(name), firstWord(known)];
  if (a === b) return true;
  return b.length >= 6 && editDistance(a, b) <= MAX_DISTANCE;
}

export function nearMisses(envNames: Iterable<string>, known: readonly string[]): NearMiss[] {
  const knownSet = new Set(known);
  const out: NearMiss[] = [];
  for (const name of envNames) {
    if (knownSet.has(name) || !/^[A-Z][A-Z0-9_]*$/.test(name)) continue;
    // One-word names of ours (WORKERS) only from 6 letters on: HOST and PORT are too close to too much.
    let best: { known: string; d: number } | undefined;
    for (const k of known) {
      if (!name.includes('_') && (k.includes('_') || k.length < 6)) continue;
      if (name.includes('_') && !looksRelated(name, k)) continue;
      const d = editDistance(name, k);
      if (d <= MAX_DISTANCE && (!best || d < best.d)) best = { known: k, d };
    }
    if (best) out.push({ variable: name, didYouMean: best.known });
  }
  return out;
}
