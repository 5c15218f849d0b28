// Leg 2 by ids streams the model's raw text (no parser runs on a text completion): this splits it into
// reasoning and content the way the engine's parser would have, continuing from the parser's state at the cut.
// Cut in the content: everything that follows is content (no parser here reads a second reasoning block). Cut in
// the reasoning: reasoning until the family's closing marker, content after it; a marker split across pieces
// is held until it is whole or cannot be one, and the marker itself is never shown (the parsers remove it).
// `afterClose`: what the engine's parser drops between the marker and the content (its spelling, e.g. R1's
// "\n\n" on llama.cpp), removed only when it is there. Pure.
import type { Phase } from '../../families/types';

export interface SplitPiece {
  readonly reasoning: string;
  readonly content: string;
}

export class RawSplitter {
  private phase: Phase;
  private held = '';
  /** After the marker: the parser's dropped lead not yet matched (a prefix of afterClose). */
  private leadPending: string | null = null;

  constructor(
    phase: Phase,
    private readonly close: string | null,
    private readonly afterClose = '',
  ) {
    this.phase = phase;
    if (phase === 'reasoning' && !close) throw new Error('a cut in the reasoning needs the closing marker');
  }

  get current(): Phase {
    return this.phase;
  }

  /** One piece of raw text: what the client gets of it now. */
  push(text: string): SplitPiece {
    if (this.phase === 'content') return { reasoning: '', content: this.dropLead(text) };
    const close = this.close as string;
    const buf = this.held + text;
    const at = buf.indexOf(close);
    if (at >= 0) {
      this.phase = 'content';
      this.held = '';
      this.leadPending = this.afterClose;
      return { reasoning: buf.slice(0, at), content: this.dropLead(buf.slice(at + close.length)) };
    }
    const keep = partialSuffix(buf, close);
    this.held = buf.slice(buf.length - keep);
    return { reasoning: buf.slice(0, buf.length - keep), content: '' };
  }

  /** The raw text ended: what was held as a possible marker is reasoning after all. */
  end(): SplitPiece {
    const held = this.held;
    this.held = '';
    if (this.phase === 'reasoning') return { reasoning: held, content: '' };
    const lead = this.leadPending;
    this.leadPending = null;
    return {
      reasoning: '',
      content: lead && lead !== this.afterClose ? this.afterClose.slice(0, this.afterClose.length - lead.length) : '',
    };
  }

  /** The parser's dropped lead after the marker, matched across pieces; what does not match is content. */
  private dropLead(text: string): string {
    const lead = this.leadPending;
    if (lead === null || lead === '') {
      this.leadPending = null;
      return text;
    }
    const n = Math.min(lead.length, text.length);
    if (text.slice(0, n) !== lead.slice(0, n)) {
      // Not the spelling: what was matched so far is content too.
      const matched = this.afterClose.slice(0, this.afterClose.length - lead.length);
      this.leadPending = null;
      return matched + text;
    }
    this.leadPending = lead.slice(n);
    if (this.leadPending === '') this.leadPending = null;
    return text.slice(n);
  }
}

/** The length of the longest suffix of `s` that is a proper prefix of `marker`. */
export function partialSuffix(s: string, marker: string): number {
  for (let k = Math.min(s.length, marker.length - 1); k > 0; k--) if (marker.startsWith(s.slice(s.length - k))) return k;
  return 0;
}
