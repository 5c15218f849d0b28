// Splits a raw harmony text stream (gpt-oss) into reasoning and content, continuing from the channel the cut
// left open. Used for leg 2 on SGLang, whose harmony parser ignores the continued prefix
// (srt/parser/reasoning_parser.py GptOssDetector L999-1066): leg 2 is asked for raw text (separate_reasoning
// false; special tokens are kept for gpt-oss, serving_chat.py L1821-1823) and split here the way SGLang splits
// leg 1: `analysis` is reasoning, `final` is content, the markers themselves are nobody's text
// (srt/parser/harmony_parser.py L136-191). Anything else (a tool call, another channel) is output this split does
// not know how to hand out, and ends the continuation.
import type { Phase } from '../families/types';

export interface HarmonyPiece {
  reasoning: string;
  content: string;
}

type State = 'analysis' | 'final' | 'between' | 'header' | 'done';

const TOKEN = /<\|([a-z_]+)\|>/;

export class HarmonySplit {
  private state: State;
  private held = '';
  private header = '';

  constructor(phase: Phase) {
    this.state = phase === 'content' ? 'final' : 'analysis';
  }

  /** One chunk of raw text; `error` when the text leaves analysis/final. */
  feed(text: string): HarmonyPiece | { error: string } {
    const out: HarmonyPiece = { reasoning: '', content: '' };
    let rest = this.held + text;
    this.held = '';
    while (rest) {
      const at = rest.indexOf('<|');
      if (this.state === 'analysis' || this.state === 'final') {
        const body = at < 0 ? rest : rest.slice(0, at);
        if (this.state === 'analysis') out.reasoning += body;
        else out.content += body;
        if (at < 0) break;
        rest = rest.slice(at);
      } else if (this.state === 'header') {
        if (at < 0) {
          this.header += rest;
          break;
        }
        this.header += rest.slice(0, at);
        rest = rest.slice(at);
      } else if (at !== 0) {
        // Text between messages, or after the answer ended: not part of either channel.
        if ((at < 0 ? rest : rest.slice(0, at)).trim()) return { error: 'text-outside-a-message' };
        if (at < 0) break;
        rest = rest.slice(at);
      }
      const m = TOKEN.exec(rest);
      if (m?.index !== 0) {
        if (rest.length < 16 && !rest.includes('|>')) {
          this.held = rest; // a marker split across chunks
          break;
        }
        return { error: 'unknown-marker' };
      }
      const err = this.onToken(m[1]);
      if (err) return { error: err };
      rest = rest.slice(m[0].length);
    }
    return out;
  }

  private onToken(name: string): string | undefined {
    const s = this.state;
    if ((s === 'analysis' || s === 'final') && name === 'end') {
      this.state = s === 'final' ? 'done' : 'between';
      return undefined;
    }
    if (s === 'final' && (name === 'return' || name === 'call')) {
      this.state = 'done';
      return undefined;
    }
    if (s === 'between' && name === 'start') {
      this.state = 'header';
      this.header = '';
      return undefined;
    }
    if (s === 'header' && (name === 'channel' || name === 'constrain')) {
      this.header += `<|${name}|>`;
      return undefined;
    }
    if (s === 'header' && name === 'message') {
      // Only `assistant<|channel|>final` or `...analysis` without a recipient is text the client reads.
      const m = /^assistant<\|channel\|>(analysis|final)$/.exec(this.header.trim());
      if (!m) return 'unexpected-channel';
      this.state = m[1] as 'analysis' | 'final';
      return undefined;
    }
    return `unexpected-${name}`;
  }
}
