// Leg 2 by ids streams the model's raw text (no parser runs on a text completion): this splits it into
// reasoning and content the way the engine's parser would have, continuing from the parser's state at the cut.
// Cut in the content: everything that follows is content (no parser here reads a second reasoning block). Cut in
// the reasoning: reasoning until the family's closing marker, content after it; a marker split across pieces
// is held until it is whole or cannot be one, and the marker itself is never shown (the parsers remove it and
// hand out every other character: vLLM's qwen3 / deepseek_r1 parsers, docs/families.md; llama.cpp's, seen on
// the real server in test/real-engine/token-ids.test.ts). Pure.
import type { Phase } from '../../families/types';

export interface SplitPiece {
  readonly reasoning: string;
  readonly content: string;
}

export class RawSplitter {
  private phase: Phase;
  private held = '';

  constructor(
    phase: Phase,
    private readonly close: string | null,
  ) {
    this.phase = phase;
    if (phase === 'reasoning' && !close) throw new Error('a cut in the reasoning needs the closing marker');
  }

  get current(): Phase {
    return this.phase;
  }

  /** One piece of raw text: what the client gets of it now. */
  push(text: string): SplitPiece {
    if (this.phase === 'content') return { reasoning: '', content: text };
    const close = this.close as string;
    const buf = this.held + text;
    const at = buf.indexOf(close);
    if (at >= 0) {
      this.phase = 'content';
      this.held = '';
      return { reasoning: buf.slice(0, at), content: buf.slice(at + close.length) };
    }
    const keep = partialSuffix(buf, close);
    this.held = buf.slice(buf.length - keep);
    return { reasoning: buf.slice(0, buf.length - keep), content: '' };
  }

  /** The raw text ended: what was held as a possible marker is reasoning after all. */
  end(): SplitPiece {
    const held = this.held;
    this.held = '';
    return { reasoning: held, content: '' };
  }
}

/** The length of the longest suffix of `s` that is a proper prefix of `marker`. */
export function partialSuffix(s: string, marker: string): number {
  for (let k = Math.min(s.length, marker.length - 1); k > 0; k--) if (marker.startsWith(s.slice(s.length - k))) return k;
  return 0;
}
