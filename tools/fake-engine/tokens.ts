// The fake engine's "tokenizer". Answers are generated from a vocabulary chosen so that tokenize() of
// any concatenation of answer tokens gives back exactly those tokens: the /tokenize endpoint, usage
// counts and continuation-prefix counts then all agree with what was streamed.

// Control tokens of both prefix families and of the pseudo chat template count as one token each.
const TOKEN_RE = /<\|[a-z_]+\|>|<\/?think>| ?[A-Za-z]+| ?\d+|[\u4e00-\u9fff]{1,2}|\p{Extended_Pictographic}|\s|[\s\S]/gu;

export function tokenize(text: string): string[] {
  return text.match(TOKEN_RE) ?? [];
}

// Ids are stable across processes: known tokens get their index in a fixed table, others a hash.
const KNOWN: string[] = [];
const KNOWN_IDS = new Map<string, number>();

export function registerVocabulary(tokens: readonly string[]): void {
  for (const t of tokens) {
    if (!KNOWN_IDS.has(t)) {
      KNOWN_IDS.set(t, KNOWN.length + 1000);
      KNOWN.push(t);
    }
  }
}

/** Every id handed out, with its token: what a prompt of ids (vLLM's /v1/completions) is read back with. */
const SEEN = new Map<number, string>();

export function tokenId(token: string): number {
  const id = KNOWN_IDS.get(token) ?? 50000 + (fnv1a(token) % 100000);
  SEEN.set(id, token);
  return id;
}

/** The token an id stands for, if this process handed it out. */
export function tokenOf(id: number): string | undefined {
  return SEEN.get(id);
}

export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Text of a message's content: a string, or the text parts of a content-part array. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p === 'object' && typeof p.text === 'string' ? p.text : '')).join('');
  }
  return '';
}

/** A pseudo chat template: `<|im_start|>role<|im_middle|>text<|im_end|>` per message + generation prompt. */
export function promptTokens(messages: any[]): string[] {
  const out: string[] = [];
  for (const m of Array.isArray(messages) ? messages : []) {
    out.push('<|im_start|>', ...tokenize(String(m?.role ?? 'user')), '<|im_middle|>');
    out.push(...tokenize(contentText(m?.content)));
    if (m?.tool_calls) out.push(...tokenize(JSON.stringify(m.tool_calls)));
    out.push('<|im_end|>');
  }
  out.push('<|im_start|>', 'assistant', '<|im_middle|>');
  return out;
}
