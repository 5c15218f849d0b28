// The prompt text an engine builds from a chat-completions body through a chat template, by that engine's own
// rule. Restated from the engines' code (versions and lines below); test/unit/templates/engine-prompt.test.ts runs
// the same bodies through SGLang's own functions and transformers' renderer (test/fidelity/harness.py) and
// requires the same text.
//
// SGLang 0.5.23 (srt/entrypoints/openai/serving_chat.py): the request's reasoning switches (reasoning_effort, a
// `reasoning` object's effort and enabled) set chat_template_kwargs' thinking and enable_thinking where the
// client did not (entrypoints/openai/protocol.py L1094-1151); a message's None fields are dropped and None content
// becomes "" (L2129-2151, parser/jinja_template_utils.py L239-241); a final assistant message with string content
// is removed when continue_final_message is set, and its content is appended verbatim after a render with the
// generation prompt (L513-549, L2153-2235); reasoning_effort and chat_template_kwargs are template variables
// (L2163-2167); the request's add_generation_prompt is not a field there.
//
// vLLM 0.33.0: reasoning_content is renamed reasoning (entrypoints/openai/chat_completion/protocol.py L576-601); a
// message reaches the template as role, content ("" for None), an assistant's reasoning under both names, and
// tool_calls / tool_call_id / name (renderers/chat_utils/chat_message.py L619, L646-660); chat_template_kwargs
// under the request's own fields, enable_thinking from reasoning_effort unless the client set it (protocol
// L643-682); continue_final_message through transformers' tag cut (renderers/hf.py L913-920), refused with
// add_generation_prompt (protocol L1058-1068).
import type { ChatTemplate, TemplateMessage } from './renderer';

export type RenderEngine = 'sglang' | 'vllm';

/** The tokenizer's special tokens the template reads (bos_token, eos_token, ...), from the model directory. */
export type SpecialTokens = Readonly<Record<string, string>>;

interface Body {
  messages?: unknown;
  reasoning?: unknown;
  chat_template_kwargs?: unknown;
  reasoning_effort?: unknown;
  tools?: unknown;
  continue_final_message?: unknown;
  add_generation_prompt?: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Message contents other than strings (content parts): the template path does not render them (see notRenderable). */
export function notRenderable(body: Body): string | undefined {
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'no-messages';
  for (const m of body.messages) {
    if (!isObject(m) || typeof m.role !== 'string') return 'message-shape';
    if (m.content !== undefined && m.content !== null && typeof m.content !== 'string') return 'content-parts';
  }
  return undefined;
}

function sglangMessage(m: Record<string, unknown>): TemplateMessage {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(m)) if (v !== null && v !== undefined) out[k] = v;
  if (out.content === undefined) out.content = '';
  return out;
}

function vllmMessage(m: Record<string, unknown>): TemplateMessage {
  const out: Record<string, unknown> = { role: m.role, content: typeof m.content === 'string' ? m.content : '' };
  const reasoning = m.reasoning ?? m.reasoning_content;
  if (m.role === 'assistant' && reasoning !== undefined && reasoning !== null) {
    out.reasoning = reasoning;
    out.reasoning_content = reasoning;
  }
  for (const k of ['tool_calls', 'tool_call_id', 'name']) if (m[k] !== undefined && m[k] !== null) out[k] = m[k];
  return out;
}

const EFFORTS = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'ultra', 'max']);

/** SGLang's normalize_reasoning_inputs: the effort it keeps and the thinking switch it derives, if any. */
function sglangReasoning(body: Body): { effort: unknown; thinking: boolean | undefined } {
  let effort = body.reasoning_effort;
  let thinking: boolean | undefined;
  const r = body.reasoning;
  if (isObject(r)) {
    const e = r.effort ?? r.reasoning_effort;
    if (typeof e === 'string' && EFFORTS.has(e)) effort = e;
    const enabled = r.enabled ?? r.enable ?? false;
    if (typeof enabled === 'string' ? ['1', 'true', 'yes', 'y', 'on'].includes(enabled.trim().toLowerCase()) : Boolean(enabled))
      thinking = true;
  }
  if (effort !== undefined && effort !== null) thinking = effort !== 'none';
  return { effort, thinking };
}

function templateVariables(engine: RenderEngine, body: Body, special: SpecialTokens): Record<string, unknown> {
  const user = isObject(body.chat_template_kwargs) ? body.chat_template_kwargs : {};
  const vars: Record<string, unknown> = { ...special };
  if (engine === 'sglang') {
    const { effort, thinking } = sglangReasoning(body);
    if (effort !== undefined && effort !== null) vars.reasoning_effort = effort;
    const kwargs = thinking === undefined ? user : { thinking, enable_thinking: thinking, ...user };
    return { ...vars, ...kwargs };
  }
  Object.assign(vars, user);
  if (body.reasoning_effort !== undefined && body.reasoning_effort !== null) {
    vars.reasoning_effort = body.reasoning_effort;
    if (!('enable_thinking' in user)) vars.enable_thinking = body.reasoning_effort !== 'none';
  }
  return vars;
}

export interface EnginePromptInputs {
  readonly template: ChatTemplate;
  readonly special: SpecialTokens;
  readonly now: Date;
}

/** The prompt text `engine` builds for `body` (a chat request, or a leg 2 continuing its final message). */
export function enginePrompt(engine: RenderEngine, body: Body, i: EnginePromptInputs): string {
  const raw = (body.messages as Record<string, unknown>[]).filter(isObject);
  const variables = templateVariables(engine, body, i.special);
  const tools = Array.isArray(body.tools) ? body.tools : undefined;
  const continuing = body.continue_final_message === true;
  if (engine === 'sglang') {
    let messages = raw.map(sglangMessage);
    let prefix = '';
    const last = messages[messages.length - 1];
    if (last?.role === 'assistant' && typeof last.content === 'string') {
      if (continuing) {
        prefix = last.content;
        messages = messages.slice(0, -1);
      } else messages = [...messages.slice(0, -1), { role: 'user', content: last.content }];
    }
    return i.template.render({ messages, addGenerationPrompt: true, variables, tools, now: i.now }) + prefix;
  }
  const messages = raw.map(vllmMessage);
  const agp = body.add_generation_prompt === undefined ? true : body.add_generation_prompt === true;
  if (continuing) {
    if (agp) throw new Error('vLLM refuses continue_final_message with add_generation_prompt');
    return i.template.renderContinuation({ messages, variables, tools, now: i.now });
  }
  return i.template.render({ messages, addGenerationPrompt: agp, variables, tools, now: i.now });
}
