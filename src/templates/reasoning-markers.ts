// Which reasoning markers a served template uses, and where a request's generation prompt leaves the model. The
// template is rendered, not guessed from the model's name:
//   - the markers: an assistant turn with a sentinel reasoning and content is rendered after the conversation;
//     where its text continues the generation prompt, the text around the sentinels is what the model writes
//     (`<think>\n` R `\n</think>\n\n` C for Qwen3; R `\n</think>\n\n` C after Qwen3.5's `<think>\n`). A template
//     that drops the final turn's reasoning (the DeepSeek-R1 distills) shows none: then the pair of a reasoning
//     parser whose markers the template's own text contains (the parsers' markers, below);
//   - the state: the generation prompt, rendered for this request, ends inside an open block (the model starts
//     in its reasoning), after a closed one (thinking off), or neither (the model opens a block itself, or none).
// Pure; the renders are the caller's (src/templates/continuation.ts).

/**
 * The reasoning parsers' marker pairs (SGLang 0.5.23 srt/parser/reasoning_parser.py detectors; vLLM 0.33.0
 * reasoning parsers): a template's text that holds both of a pair's markers uses that pair. Harmony channels and
 * Kimi-K3's XTML are not pairs a parser strips alike; they are the family table's (src/families/table/).
 */
export const PARSER_MARKERS: readonly (readonly [string, string])[] = [
  ['<seed:think>', '</seed:think>'],
  ['<mm:think>', '</mm:think>'],
  ['<|START_THINKING|>', '<|END_THINKING|>'],
  ['[THINK]', '[/THINK]'],
  // Gemma 4: SGLang's Gemma4Detector strips `<|channel>` and its label `thought\n` (reasoning_parser.py L1320-1341).
  ['<|channel>thought\n', '<channel|>'],
  ['<thinking>', '</thinking>'],
  ['<think>', '</think>'],
];

export interface Markers {
  readonly open: string;
  readonly close: string;
  /** How they were found: the template's rendering of the model's turn, or a parser's pair in its text. */
  readonly from: 'rendered-turn' | 'template-text';
  /**
   * The whitespace the template writes around the markers in the model's own turn (rendered-turn only): the
   * model was trained on it, and a parser that hands out every character delivers it with the parts.
   */
  readonly spelling?: Spelling;
}

export interface Spelling {
  /** Before the opening marker (GLM-4.6: "\n"); the model's, when the prompt does not open the block. */
  readonly lead: string;
  readonly afterOpen: string;
  readonly beforeClose: string;
  readonly afterClose: string;
}

/** Where the generation prompt leaves the model for one request. */
export type PromptState =
  /** Inside an open reasoning block: the model's first words are reasoning. */
  | 'opens'
  /** After a closed (empty) block: thinking is off, the model writes its content. */
  | 'closed'
  /** Neither: the model writes `open` R `close` C, or only C. */
  | 'free';

export const REASONING_SENTINEL = 'GW-REASONING-SENTINEL';
export const CONTENT_SENTINEL = 'GW-CONTENT-SENTINEL';

/** Text around the sentinels of a rendered model turn; undefined when the turn does not show both in order. */
function aroundSentinels(turn: string): { before: string; between: string } | undefined {
  const r = turn.indexOf(REASONING_SENTINEL);
  const c = turn.indexOf(CONTENT_SENTINEL);
  if (r < 0 || c < 0 || c < r) return undefined;
  return { before: turn.slice(0, r), between: turn.slice(r + REASONING_SENTINEL.length, c) };
}

/**
 * The markers, from `turn` (the text an assistant turn with both sentinels renders after the generation prompt,
 * or undefined when it does not continue the generation prompt) and the generation prompt `gp`, else from the
 * template's text. Undefined: the template has no reasoning format the gateway can rebuild.
 */
export function findMarkers(templateText: string, gp: string, turn: string | undefined): Markers | undefined {
  const around = turn === undefined ? undefined : aroundSentinels(turn);
  const fromText = PARSER_MARKERS.find(([o, c]) => templateText.includes(o) && templateText.includes(c));
  if (around) {
    // A parser's pair where the render shows one (Cohere's close is followed by `<|START_TEXT|>`, which the
    // model writes too), else the non-blank text around the reasoning.
    const pair = PARSER_MARKERS.find(([o, c]) => around.between.includes(c) && (around.before.includes(o) || gp.trimEnd().endsWith(o)));
    const close = pair?.[1] ?? around.between.trim();
    const written = pair ? (around.before.includes(pair[0]) ? pair[0] : '') : around.before.trim();
    const open = pair?.[0] ?? (written || '');
    if (open && close && !isChannelFormat(open, close)) {
      const o = written ? around.before.indexOf(open) : -1;
      const c = around.between.indexOf(close);
      const spelling = {
        lead: o >= 0 ? around.before.slice(0, o) : around.before,
        afterOpen: o >= 0 ? around.before.slice(o + open.length) : '',
        beforeClose: around.between.slice(0, c),
        afterClose: around.between.slice(c + close.length),
      };
      return { open, close, from: 'rendered-turn', spelling };
    }
    if (!around.before.trim() && !around.between.trim()) return undefined;
  }
  return fromText ? { open: fromText[0], close: fromText[1], from: 'template-text' } : undefined;
}

/** Harmony-like channel headers (`<|channel|>analysis<|message|>`): not a pair the engines' parsers strip alike. */
function isChannelFormat(open: string, close: string): boolean {
  return /<\|channel\|>|<\|start\|>|<\|open\|>/.test(open + close);
}

/** Where this request's generation prompt leaves the model. */
export function promptState(prompt: string, m: Markers): PromptState {
  const tail = prompt.trimEnd();
  if (tail.endsWith(m.open)) return 'opens';
  if (tail.endsWith(m.close)) return 'closed';
  return 'free';
}
