// The fake engine's `generic` family (an engine whose markers the client never sees and nobody counts): the
// inverse of the reference gateway's `<think>` + reasoning [+ `</think>` + content] prefix. Every other family
// speaks through tools/fake-engine/family-speech.ts. (The kimi-k3 markers stay for the unit tests of this parser.)

export type PrefixFamily = 'generic' | 'kimi-k3';

export type ParsedPrefix =
  | { kind: 'split'; reasoning: string; content: string }
  /** No marker at all: reasoning (template opened thinking) or content (thinking off); the caller decides. */
  | { kind: 'untagged'; text: string };

export const GENERIC_OPEN = '<think>';
export const GENERIC_CLOSE = '</think>';
export const K3_OPEN_THINK = '<|open|>think<|sep|>';
export const K3_CLOSE_THINK = '<|close|>think<|sep|>';
export const K3_OPEN_RESPONSE = '<|open|>response<|sep|>';

interface Markers {
  open: string;
  close: string;
  /** Opens the content part after the closed thinking (K3 only). */
  contentOpen?: string;
}

const MARKERS: Record<PrefixFamily, Markers> = {
  generic: { open: GENERIC_OPEN, close: GENERIC_CLOSE },
  'kimi-k3': { open: K3_OPEN_THINK, close: K3_CLOSE_THINK, contentOpen: K3_OPEN_RESPONSE },
};

function stripLeading(text: string, marker: string | undefined): [string, boolean] {
  return marker && text.startsWith(marker) ? [text.slice(marker.length), true] : [text, false];
}

export function parsePrefix(family: PrefixFamily, prefix: string): ParsedPrefix {
  const m = MARKERS[family];
  const [rest, opened] = stripLeading(prefix, m.open);
  const close = rest.indexOf(m.close);
  if (close >= 0) {
    const [content] = stripLeading(rest.slice(close + m.close.length), m.contentOpen);
    return { kind: 'split', reasoning: rest.slice(0, close), content };
  }
  if (opened) return { kind: 'split', reasoning: rest, content: '' };
  // K3 with thinking skipped entirely: the response channel is opened directly.
  const [content, responseOpened] = stripLeading(rest, m.contentOpen);
  if (responseOpened) return { kind: 'split', reasoning: '', content };
  return { kind: 'untagged', text: rest };
}
