// One fidelity case of the template path: a template, an engine, a conversation, a thinking setting and a
// reasoning parser (or none). The model's raw output comes from the template (model-output.ts); the engine's
// prompts come from the engine's own code (harness.py: SGLang's request handling and transformers' renderer);
// the leg 2 request comes from the production planner with the template served (CHAT_TEMPLATE). Every cut must
// be exact (leg 2's prompt is the uninterrupted one plus the delivered raw text, and the stitched stream equals
// the uninterrupted one) or refused before leg 2 is sent; anything else is a drift.

import { planContinuationRequest } from '../../src/recovery/continuation-request';
import { HarmonySplit } from '../../src/recovery/harmony-split';
import { designLeg2 } from '../../src/recovery/leg2-design';
import { RestartGuard } from '../../src/recovery/restart-guard';
import { serveTemplates } from '../../src/templates/served';
import { markerSplit, promptOpens, type Split } from '../../tools/fake-engine/marker-split';
import type { Harness } from './harness-client';
import { modelOutput, rawTokens } from './model-output';

export type Engine = 'sglang' | 'vllm';

/** SGLang 0.5.23's --reasoning-parser for a marker pair (srt/parser/reasoning_parser_names.py). */
export const SGLANG_PARSER_FOR: Record<string, string> = {
  '<think>': 'qwen3',
  '[THINK]': 'mistral',
  '<|START_THINKING|>': 'cohere_command4',
  '<|channel>thought\n': 'gemma4',
  '<mm:think>': 'minimax-m3',
};

export interface CaseInput {
  readonly name: string;
  readonly template: string;
  readonly special: Record<string, string>;
  readonly engine: Engine;
  readonly messages: object[];
  readonly kwargs: Record<string, unknown> | undefined;
  /** `engine`: the engine's parser for the template's markers; `none`: no parser (everything is content). */
  readonly parser: 'engine' | 'none';
  readonly nowMs: number;
  /**
   * The family table's path instead of the template path: CONTINUATION_MODEL names the entry and no template is
   * served; the family's SGLang parser (none: no split), vLLM's split for it (our reading), its markers, and
   * what SGLang's prompt job needs beyond the template (DeepSeek-V3.2's encoder).
   */
  readonly table?: {
    readonly continuationModel: string;
    readonly sglangParser: string | undefined;
    readonly vllmSplit: (tokens: string[], prompt: string, prompt1: string) => Split[];
    readonly markers: readonly string[];
    /** The family's marker pair and whether its model thinks here (what model-output.ts falls back to). */
    readonly pair?: readonly [string, string];
    readonly thinks?: boolean;
    readonly promptExtra?: Record<string, unknown>;
  };
  /**
   * vLLM cells through vLLM 0.33.0's own code (test/fidelity/vllm_harness.py) instead of harness.py's restatement
   * and our parser reading: its renderer for every prompt, its `--reasoning-parser` (none: no split).
   */
  readonly vllmOwn?: {
    readonly harness: Harness;
    readonly parser: string | undefined;
    readonly tokenizer: string;
    readonly addedTokens: readonly string[];
    /**
     * The template's markers have no vLLM parser (`<thinking>`): the prompts are still vLLM's, the split is our
     * marker split, as in the npm sweep (test/fidelity/template-sweep.ts).
     */
    readonly markerSplit?: boolean;
  };
}

export type Cut =
  | { kind: 'exact'; phase: string }
  | { kind: 'refused'; phase: string; detail: string }
  | { kind: 'drift'; phase: string; why: string };

export interface CaseResult {
  readonly skipped?: string;
  /** The model's raw text the cuts were made in. */
  readonly raw?: string;
  readonly how?: string;
  readonly parserName?: string;
  readonly cuts: Cut[];
}

const join = (ds: readonly Split[]): Split => ({
  reasoning: ds.map((d) => d.reasoning).join(''),
  content: ds.map((d) => d.content).join(''),
});

function tokensAfter(tokens: string[], offset: number): string[] {
  let at = 0;
  for (let i = 0; i < tokens.length; i++) {
    const end = at + tokens[i].length;
    if (offset < end) return [tokens[i].slice(offset - at), ...tokens.slice(i + 1)];
    at = end;
  }
  return [];
}

export async function runTemplateCase(h: Harness, c: CaseInput): Promise<CaseResult> {
  const body: Record<string, unknown> = { model: 'm', stream: true, messages: c.messages };
  if (c.kwargs) body.chat_template_kwargs = c.kwargs;
  const promptJob = (b: Record<string, unknown>) => ({
    op: `${c.engine}_prompt`,
    body: b,
    special: c.special,
    template: c.template,
    nowMs: c.nowMs,
  });
  const own = c.engine === 'vllm' ? c.vllmOwn : undefined;
  const ownJob = (b: Record<string, unknown>) => ({
    body: b,
    special: c.special,
    template: c.template,
    tokenizer: own?.tokenizer,
    added_tokens: own?.addedTokens,
    nowMs: c.nowMs,
  });
  const prompt = (b: Record<string, unknown>) => (own ? own.harness.call({ op: 'vllm_prompt', ...ownJob(b) }) : h.call(promptJob(b)));
  const p1 = await prompt(body);
  if (!p1.ok) return { skipped: `the template refuses this conversation (${String(p1.error).slice(0, 80)})`, cuts: [] };
  const prompt1: string = p1.text;
  const out = await modelOutput(
    h,
    { template: c.template, messages: c.messages, kwargs: c.kwargs ?? {}, special: c.special, nowMs: c.nowMs },
    prompt1,
    c.table ? { markers: c.table.pair, thinks: c.table.thinks } : {},
  );
  const tokens = rawTokens(out.text, [...(out.markers ?? []), ...(c.table?.markers ?? [])]);
  const sglangParser = c.table ? c.table.sglangParser : out.markers ? SGLANG_PARSER_FOR[out.markers[0]] : undefined;
  const vllmParser = own && !own.markerSplit ? `${own.parser ?? 'none'} (vLLM's own)` : 'marker-split (our reading of vLLM)';
  const parserName = c.parser === 'none' ? 'none' : c.engine === 'sglang' ? (sglangParser ?? 'marker-split') : vllmParser;
  const split = async (b: Record<string, unknown>, toks: string[], prompt: string): Promise<Split[]> => {
    // SGLang with separate_reasoning false streams the raw text (gpt-oss's leg 2; the gateway splits it).
    if (c.parser === 'none' || b.separate_reasoning === false) return toks.map((t) => ({ reasoning: '', content: t }));
    if (own && !own.markerSplit) {
      if (!own.parser) return toks.map((t) => ({ reasoning: '', content: t }));
      const r = await own.harness.call({ op: 'vllm_split', parser: own.parser, chunks: toks, finish: true, ...ownJob(b) });
      if (!r.ok) throw new Error(`vllm_split: ${r.error}`);
      return (r.deltas as Array<[string, string]>).map(([reasoning, content]) => ({ reasoning, content }));
    }
    if (c.table) {
      if (c.engine === 'vllm') return c.table.vllmSplit(toks, prompt, prompt1);
      if (!sglangParser) return toks.map((t) => ({ reasoning: '', content: t }));
    } else if (!out.markers) return toks.map((t) => ({ reasoning: '', content: t }));
    if (c.engine === 'sglang' && sglangParser) {
      const r = await h.call({ op: 'sglang_split', parser: sglangParser, chunks: toks, body: b, finish: true, template: c.template });
      if (!r.ok) throw new Error(`sglang_split: ${r.error}`);
      return (r.deltas as Array<[string, string]>).map(([reasoning, content]) => ({ reasoning, content }));
    }
    return markerSplit(toks, out.markers, promptOpens(prompt, out.markers));
  };
  const deltas = await split(body, tokens, prompt1);
  const full = join(deltas);
  const served = c.table ? undefined : serveTemplates({ default: c.template }, c.special, c.name);
  const clock = { leg1At: new Date(c.nowMs), now: new Date(c.nowMs) };
  const cuts: Cut[] = [];
  for (let k = 1; k < tokens.length; k++) {
    const delivered = join(deltas.slice(0, k));
    if (!delivered.reasoning && !delivered.content) continue;
    const phase = delivered.content ? 'content' : 'reasoning';
    const state = { ...delivered, toolCallsSeen: false };
    const target = { continuationModel: c.table?.continuationModel ?? 'an-unknown-model', engine: c.engine, served, clock };
    const plan = planContinuationRequest(body, state, {
      ...target,
      rates: { cjk: 1.6, other: 4 },
      designed: designLeg2(body, state, target),
    });
    if (plan.kind === 'skip') {
      cuts.push({ kind: 'refused', phase, detail: `${plan.reason}:${plan.detail ?? ''}` });
      continue;
    }
    const p2 = await prompt(plan.body);
    if (!p2.ok) {
      cuts.push({ kind: 'drift', phase, why: `leg 2 does not render: ${String(p2.error).slice(0, 120)}` });
      continue;
    }
    const continued = p2.text.startsWith(prompt1) ? p2.text.slice(prompt1.length) : undefined;
    if (continued === undefined || !out.text.startsWith(continued)) {
      const at = [...p2.text].findIndex((ch, i) => ch !== (prompt1 + out.text)[i]);
      cuts.push({ kind: 'drift', phase, why: `leg 2's prompt is not the uninterrupted one plus the text (parts at ${at})` });
      continue;
    }
    let leg2 = await split(plan.body, tokensAfter(tokens, continued.length), p2.text);
    if (plan.design.shape.split === 'harmony') {
      const h2 = new HarmonySplit(plan.design.phase);
      leg2 = leg2.map((d) => {
        const p = h2.feed(d.content);
        if ('error' in p) throw new Error(`harmony split: ${p.error}`);
        return p;
      });
    }
    const guard = new RestartGuard(delivered, plan.design.phase);
    for (const d of leg2) guard.observe(d.reasoning, d.content);
    const got = join([delivered, ...leg2]);
    const same = got.reasoning === full.reasoning && got.content === full.content;
    const guarded = guard.finish() === 'restart';
    // The engine's parser mis-split leg 2 (reasoning after content): the guard ends the stream explicitly.
    if (!same && guarded) cuts.push({ kind: 'refused', phase, detail: 'leg2-restarted (the restart guard)' });
    else if (!same) cuts.push({ kind: 'drift', phase, why: `stitched ${JSON.stringify(got)} != uninterrupted ${JSON.stringify(full)}` });
    else if (guarded) cuts.push({ kind: 'drift', phase, why: 'the restart guard refused a correct continuation' });
    else cuts.push({ kind: 'exact', phase });
  }
  return { how: out.how, parserName, cuts, raw: out.text };
}
