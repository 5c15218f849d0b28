// llama-server's chat stream never carries the ids of the tokens its reasoning parser consumed: a token whose
// text is (part of) the closing marker, `</think>`, gives the parser nothing to hand out, so no frame is sent
// and its id is lost (tools/server/server-task.cpp to_json_oaicompat_chat: deltas only for non-empty diffs, the
// token's logprobs on the last delta; llama.cpp 80fb11a as node-llama-cpp 3.21.1 bundles it). The engine's
// own count (`timings.predicted_n`) says how many ids are missing and where: between the last reasoning chunk
// and the first content chunk. This module works out the text of those tokens, a piece of the family's
// closing marker, from what is known exactly on both sides of the hole (each sent token's own text, the
// `token` of its logprobs entry, and the text the client was shown); the engine's tokenizer then gives its ids
// (prompt-ids.ts), taken only when they are exactly as many as the engine says are missing. The hole's ids are
// therefore the engine's tokenization of the marker's text checked by count, not ids the stream carried: the
// model could in principle have sampled the same text in another split of the same length (a real R1
// checkpoint's `</think>` is one special token, so there is only one). Any other hole (a token ending
// mid-character, a held piece of reasoning released later) stays a gap, and the text path continues. Pure.

/** The ids llama-server's stream did not carry at the close of the reasoning, and what surrounds them. */
export interface MarkerHole {
  /** Where the missing ids go in the generated ids (the count of ids before them). */
  readonly at: number;
  /** How many: the engine's predicted_n less the ids received. */
  readonly missing: number;
  /** The text of every token received before the hole (their logprobs `token`), joined. */
  readonly piecesBefore: string;
  /** The text of the token that came with the first content chunk, and the content that chunk showed. */
  readonly pieceAfter: string;
  readonly contentAfter: string;
}

/**
 * The hole's text, a piece of the closing marker, given the reasoning the client was shown (all of it: the
 * reasoning ended at the hole). The parser hands out every character but the marker's (llama.cpp: `</think>\n\nA`
 * gives content `\n\nA`), and its reasoning may open with text of the generation prompt (the R1 distills'
 * prompt ends `<think>\n`, and that newline is shown as the reasoning's first character): so the pieces before
 * the hole are the shown reasoning's end followed by the marker's start (a token like `.</` shows `.` and the
 * parser holds `</`), and the piece after it the marker's end followed by the content shown (a token like
 * `>\n\n` shows `\n\n`). Exactly one way to read them so, or the hole is not filled.
 */
export function markerHoleText(hole: MarkerHole, reasoning: string, marker: string): { text: string } | { fallback: string } {
  if (hole.missing < 1) return { fallback: 'marker-hole-empty' };
  const pieces = hole.piecesBefore;
  const heads: number[] = [];
  for (let k = 0; k < marker.length && k <= pieces.length; k++) {
    const shown = pieces.slice(0, pieces.length - k);
    if (marker.startsWith(pieces.slice(pieces.length - k)) && reasoning.endsWith(shown)) heads.push(k);
  }
  if (heads.length === 0) return { fallback: 'marker-hole-reasoning-differs' };
  if (heads.length > 1) return { fallback: 'marker-hole-ambiguous' };
  const head = heads[0];
  if (!hole.pieceAfter.endsWith(hole.contentAfter)) return { fallback: 'marker-hole-content-differs' };
  const tail = hole.pieceAfter.length - hole.contentAfter.length;
  if (!marker.endsWith(hole.pieceAfter.slice(0, tail))) return { fallback: 'marker-hole-not-marker' };
  const end = marker.length - tail;
  if (end <= head) return { fallback: 'marker-hole-not-marker' };
  return { text: marker.slice(head, end) };
}

/** The generated ids with the hole's ids put in, when the engine's tokenization has exactly the missing count. */
export function fillMarkerHole(
  generated: readonly number[],
  hole: MarkerHole,
  holeIds: readonly number[],
): { ids: number[] } | { fallback: string } {
  if (holeIds.length !== hole.missing) return { fallback: 'marker-hole-count-differs' };
  return { ids: [...generated.slice(0, hole.at), ...holeIds, ...generated.slice(hole.at)] };
}
