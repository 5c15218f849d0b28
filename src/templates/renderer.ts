// A chat template rendered as the engines render it: transformers' `render_jinja_template` (which SGLang and vLLM
// call through `tokenizer.apply_chat_template`), here with @huggingface/jinja, the JavaScript Jinja that Hugging
// Face maintains for these templates. What transformers adds around Jinja is restated here, from
// transformers 5.19.0 src/transformers/utils/chat_template_utils.py:
//   - the environment: trim_blocks and lstrip_blocks, `raise_exception`, `strftime_now` (datetime.now()),
//     `tojson` as json.dumps(ensure_ascii=False) (L484-500);
//   - the variables: messages, tools, documents, add_generation_prompt and the caller's kwargs, the tokenizer's
//     special tokens among them (L587-593);
//   - continue_final_message: a tag appended to the final message's content, the rendering cut at the tag, or
//     before the whitespace the template trimmed after the content (L545-611).
// The clock is an input: a render "as of" an instant is the same text whenever it is made.

import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import { ERROR_CODES, GatewayError } from '../errors';
import { pyStrip, usePythonStripping } from './python-strings';
import { strftime } from './strftime';

usePythonStripping();

export type TemplateMessage = Readonly<Record<string, unknown>>;

export interface RenderInputs {
  readonly messages: readonly TemplateMessage[];
  readonly addGenerationPrompt: boolean;
  /** Template variables beside messages: special tokens, chat_template_kwargs, reasoning_effort, ... */
  readonly variables?: Readonly<Record<string, unknown>>;
  readonly tools?: readonly unknown[];
  /** The instant `strftime_now` reads. */
  readonly now: Date;
}

/** A template that raised (`raise_exception`) or could not be evaluated for these inputs. */
export class TemplateRenderError extends GatewayError {
  readonly code = ERROR_CODES.templateRender;
}

const CONTINUE_TAG = 'CONTINUE_FINAL_MESSAGE_TAG ';

type Program = ReturnType<typeof parse>;

export class ChatTemplate {
  private readonly program: Program;
  /** The template calls strftime_now: its text depends on the day it is rendered. */
  readonly readsClock: boolean;

  constructor(readonly text: string) {
    // Jinja2's default keep_trailing_newline=False drops one trailing newline of the source.
    const source = text.endsWith('\n') ? text.slice(0, -1) : text;
    try {
      this.program = parse(tokenize(source, { lstrip_blocks: true, trim_blocks: true }));
    } catch (e) {
      throw new TemplateRenderError(`the template could not be parsed: ${(e as Error).message}`);
    }
    this.readsClock = /\bstrftime_now\b/.test(text);
  }

  render(i: RenderInputs): string {
    const env = new Environment();
    const globals: Record<string, unknown> = {
      true: true,
      false: false,
      none: null,
      True: true,
      False: false,
      None: null,
      range,
      raise_exception: (message: unknown) => {
        throw new TemplateRenderError(`the template raised: ${String(message)}`);
      },
      strftime_now: (format: unknown) => strftime(i.now, String(format)),
    };
    const vars: Record<string, unknown> = {
      ...globals,
      ...i.variables,
      messages: i.messages,
      tools: i.tools ?? null,
      documents: null,
      add_generation_prompt: i.addGenerationPrompt,
    };
    for (const [k, v] of Object.entries(vars)) env.set(k, v);
    try {
      return new Interpreter(env).run(this.program).value as string;
    } catch (e) {
      if (e instanceof TemplateRenderError) throw e;
      throw new TemplateRenderError(`the template could not be rendered: ${(e as Error).message}`);
    }
  }

  /**
   * transformers' continue_final_message: the conversation rendered without a generation prompt, cut where the
   * final message's content ends (the whitespace after it the template trimmed is cut too).
   */
  renderContinuation(i: Omit<RenderInputs, 'addGenerationPrompt'>): string {
    const messages = i.messages.map((m) => ({ ...m }));
    const last = messages[messages.length - 1];
    if (!last || typeof last.content !== 'string')
      throw new TemplateRenderError('continue_final_message: the final message has no content to continue');
    if (!this.text.includes('content')) throw new TemplateRenderError('continue_final_message: the template does not read a content field');
    const final = last.content;
    last.content = final + CONTINUE_TAG;
    const rendered = this.render({ ...i, messages, addGenerationPrompt: false });
    const tag = CONTINUE_TAG.trim();
    if (!rendered.includes(pyStrip(final, null, true, true)) || !rendered.includes(tag))
      throw new TemplateRenderError('continue_final_message: the template does not render the final message');
    const at = rendered.lastIndexOf(tag);
    return rendered.slice(at, at + CONTINUE_TAG.length) === CONTINUE_TAG
      ? rendered.slice(0, at)
      : pyStrip(rendered.slice(0, at), null, false, true);
  }
}

function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new TemplateRenderError('range() step must not be zero');
  const out: number[] = [];
  for (let n = from; step > 0 ? n < to : n > to; n += step) out.push(n);
  return out;
}
