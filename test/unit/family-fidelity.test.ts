// Every family x engine x cut point, rendered through the family's REAL chat template: the leg 2 request the
// gateway builds (planContinuationRequest, the production code) must make the engine's prompt byte for byte the
// uninterrupted request's prompt followed by raw text the model had generated up to the cut, and leg 2's
// output, split by the engine's reasoning parser, must complete the client's reasoning and content exactly as
// the uninterrupted stream would have.
//
// What is real here: the templates (llama.cpp's models/templates copies, scripts/llama-cpp-assets.sh), the Jinja
// renderer (transformers 5.19.0's render_jinja_template, which both engines call), SGLang 0.5.23's request
// model, continuation handling, template detection, DeepSeek-V3.2 encoder and reasoning parsers
// (test/fidelity/harness.py). What is our reading: vLLM's message conversion (in harness.py, with its lines) and
// vLLM's reasoning parsers (src/fake-engine/family-speech.ts): vLLM cannot be imported without torch.
import { rawTokens, sglangSplit, vllmPromptOpensReasoning, vllmSplit } from '../../src/fake-engine/family-speech';
import { FAMILIES } from '../../src/families/table';
import type { ModelFamily, Phase } from '../../src/families/types';
import { planContinuationRequest } from '../../src/recovery/continuation-request';
import { HarmonySplit } from '../../src/recovery/harmony-split';
import { RestartGuard } from '../../src/recovery/restart-guard';
import { type Assets, Harness, provisionAssets } from '../fidelity/harness-client';

jest.setTimeout(15 * 60 * 1000);

// Word tokens with their leading space, a CJK and an emoji token (cuts right after a multi-byte character).
const REASONING = ['Let', ' me', ' think', ':', ' 你好', ' 🙂', ' step', ' two', '.'];
const CONTENT = ['The', ' answer', ' is', ' 42', ' —', ' 世界', ' ✨', ' done', '.'];

const CONVERSATIONS: Record<string, Array<Record<string, string>>> = {
  'one user turn': [{ role: 'user', content: 'What is the answer?' }],
  'with a system prompt': [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What is the answer?' },
  ],
  'with earlier turns': [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello! How can I help?' },
    { role: 'user', content: 'What is the answer?' },
  ],
  // Gemma's template refuses a system role.
  'earlier turns, no system prompt': [
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello! How can I help?' },
    { role: 'user', content: 'What is the answer?' },
  ],
};

/** The tokenizer's special tokens the templates read (transformers passes special_tokens_map). */
const SPECIAL: Record<string, Record<string, string>> = {
  'deepseek-v3.1': { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' },
  'deepseek-v3.2': { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' },
  'deepseek-v4': { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' },
  'deepseek-r1': { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' },
  'llama-3': { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' },
  mistral: { bos_token: '<s>', eos_token: '</s>' },
  gemma: { bos_token: '<bos>', eos_token: '<eos>' },
};

/** SGLang's --reasoning-parser for each family (srt/parser/reasoning_parser_names.py); none = no split. */
const SGLANG_PARSER: Record<string, string | undefined> = {
  qwen3: 'qwen3',
  'qwen3.5': 'qwen3',
  'glm-4.6': 'glm45',
  'glm-4.7': 'glm45',
  'deepseek-v3.1': 'deepseek-v3',
  'deepseek-v3.2': 'deepseek-v3',
  'deepseek-v4': 'deepseek-v4',
  'deepseek-r1': 'deepseek-r1',
  'kimi-k2': 'kimi_k2',
  'kimi-k3': 'kimi_k3',
  'gpt-oss': 'gpt-oss',
  'minimax-m2': 'minimax',
};

/** The thinking settings each family's template reads, beyond its default. */
const THINKING_OFF: Record<string, Record<string, unknown>> = {
  qwen3: { enable_thinking: false },
  'qwen3.5': { enable_thinking: false },
  'glm-4.6': { enable_thinking: false },
  'glm-4.7': { enable_thinking: false },
  'deepseek-v3.1': { thinking: false },
  'deepseek-v3.2': { thinking: false },
  'kimi-k3': { thinking: false },
};
const THINKING_ON: Record<string, Record<string, unknown>> = {
  'deepseek-v3.1': { thinking: true },
  'deepseek-v3.2': { thinking: true },
  'deepseek-r1': { enable_thinking: true },
};

type Engine = 'sglang' | 'vllm';
interface Delta {
  reasoning: string;
  content: string;
}
type CutResult =
  | { kind: 'exact'; phase: Phase }
  | { kind: 'refused'; phase: Phase; detail: string }
  | { kind: 'inexact'; phase: Phase; why: string };

let assets: Assets;
let harness: Harness;
beforeAll(() => {
  assets = provisionAssets();
  harness = Harness.start();
});
afterAll(async () => {
  await harness?.stop();
});

const join = (ds: readonly Delta[]): Delta => ({
  reasoning: ds.map((d) => d.reasoning).join(''),
  content: ds.map((d) => d.content).join(''),
});

function promptJob(family: ModelFamily, engine: Engine, body: Record<string, unknown>): Record<string, unknown> {
  const job: Record<string, unknown> = { body, special: SPECIAL[family.name] ?? {}, parser: SGLANG_PARSER[family.name] };
  // SGLang renders DeepSeek-V3.2 with its own encoder (the checkpoint has no chat template: chat_encoding.py).
  if (engine === 'sglang' && family.name === 'deepseek-v3.2') return { ...job, op: 'sglang_prompt', encoder: 'dsv32' };
  return { ...job, op: engine === 'sglang' ? 'sglang_prompt' : 'vllm_prompt', templatePath: `${assets.templates}/${family.template}` };
}

/** `currentTurn`: the prompt's text after the generation prompt (leg 2's continued text; '' for leg 1). */
async function split(
  family: ModelFamily,
  engine: Engine,
  body: Record<string, unknown>,
  tokens: string[],
  thinking: boolean,
  currentTurn: string,
) {
  if (engine === 'vllm') return vllmSplit(family, tokens, thinking, vllmPromptOpensReasoning(family, currentTurn, thinking));
  const parser = SGLANG_PARSER[family.name];
  if (!parser || (body as any).separate_reasoning === false) return tokens.map((t) => ({ reasoning: '', content: t }));
  const r = await harness.call({
    op: 'sglang_split',
    parser,
    chunks: tokens,
    body,
    finish: true,
    templatePath: `${assets.templates}/${family.template}`,
  });
  if (!r.ok) throw new Error(r.error);
  return (r.deltas as Array<[string, string]>).map(([reasoning, content]) => ({ reasoning, content }));
}

/** The raw tokens after `offset` characters, the token at the boundary split where the offset falls. */
function tokensAfter(tokens: string[], offset: number): string[] {
  let at = 0;
  for (let i = 0; i < tokens.length; i++) {
    const end = at + tokens[i].length;
    if (offset < end) return [tokens[i].slice(offset - at), ...tokens.slice(i + 1)];
    at = end;
  }
  return [];
}

async function runCase(family: ModelFamily, engine: Engine, thinkingKw: Record<string, unknown> | undefined, messages: object[]) {
  const body: Record<string, unknown> = { model: 'm', stream: true, messages, ...(thinkingKw ? { chat_template_kwargs: thinkingKw } : {}) };
  const thinking = family.thinking({ chatTemplateKwargs: thinkingKw ?? {}, reasoningEffort: undefined }, engine);
  const tokens = rawTokens(family, thinking, REASONING, CONTENT);
  const raw = tokens.join('');
  let prompt1: string;
  try {
    prompt1 = await harness.text(promptJob(family, engine, body));
  } catch (e) {
    return {
      skipped: `the template refuses this conversation: ${(e as Error).message.slice(0, 120)}`,
      cuts: [] as CutResult[],
      fakeDiffers: false,
    };
  }
  const deltas = await split(family, engine, body, tokens, thinking, '');
  const full = join(deltas);
  // The fake engine's SGLang speech (src/fake-engine/family-speech.ts) must be SGLang's own split, token by token.
  const fakeDiffers =
    engine === 'sglang' &&
    family.engines.sglang.phases.length > 0 &&
    JSON.stringify(sglangSplit(family, tokens, thinking).map(({ reasoning, content }) => ({ reasoning, content }))) !==
      JSON.stringify(deltas);
  const cuts: CutResult[] = [];
  for (let k = 1; k < tokens.length; k++) {
    const delivered = join(deltas.slice(0, k));
    if (!delivered.reasoning && !delivered.content) continue;
    const phase: Phase = delivered.content ? 'content' : 'reasoning';
    const plan = planContinuationRequest(
      body,
      { ...delivered, toolCallsSeen: false },
      { continuationModel: family.examples[0], engine, rates: { cjk: 1.6, other: 4 } },
    );
    if (plan.kind === 'skip') {
      cuts.push({ kind: 'refused', phase, detail: `${plan.reason}:${plan.detail ?? ''}` });
      continue;
    }
    const prompt2 = await harness.call(promptJob(family, engine, plan.body));
    if (!prompt2.ok) {
      cuts.push({ kind: 'inexact', phase, why: `leg 2 does not render: ${prompt2.error.slice(0, 200)}` });
      continue;
    }
    if (!prompt2.text.startsWith(prompt1)) {
      cuts.push({ kind: 'inexact', phase, why: `leg 2 prompt ${JSON.stringify(prompt2.text.slice(-80))} is not prompt1 + text` });
      continue;
    }
    const continued = prompt2.text.slice(prompt1.length);
    if (!raw.startsWith(continued)) {
      cuts.push({ kind: 'inexact', phase, why: `continues from ${JSON.stringify(continued)}, not a prefix of ${JSON.stringify(raw)}` });
      continue;
    }
    // Leg 2: the model goes on from exactly there; the engine splits it as it splits a continuation.
    let leg2 = await split(family, engine, plan.body, tokensAfter(tokens, continued.length), thinking, continued);
    if (plan.design.shape.split === 'harmony') {
      const h = new HarmonySplit(plan.design.phase);
      leg2 = leg2.map((d) => {
        const p = h.feed(d.content);
        if ('error' in p) throw new Error(`harmony split: ${p.error}`);
        return p;
      });
    }
    const guard = new RestartGuard(delivered, plan.design.phase);
    for (const d of leg2) guard.observe(d.reasoning, d.content);
    const got = join([delivered, ...leg2]);
    if (got.reasoning !== full.reasoning || got.content !== full.content) {
      cuts.push({ kind: 'inexact', phase, why: `stitched ${JSON.stringify(got)} != uninterrupted ${JSON.stringify(full)}` });
    } else if (guard.finish() === 'restart') {
      cuts.push({ kind: 'inexact', phase, why: 'the restart guard refused a correct continuation' });
    } else cuts.push({ kind: 'exact', phase });
  }
  return { skipped: undefined, cuts, fakeDiffers };
}

/** family x engine x thinking x conversation: the cells the README's family table reports. */
const CASES: Array<[string, Engine, string, string, Record<string, unknown> | undefined]> = [];
for (const f of FAMILIES) {
  for (const engine of ['sglang', 'vllm'] as const) {
    const modes: Array<[string, Record<string, unknown> | undefined]> = [['default', THINKING_ON[f.name]]];
    if (THINKING_OFF[f.name]) modes.push(['thinking off', THINKING_OFF[f.name]]);
    for (const [mode, kw] of modes) for (const conv of Object.keys(CONVERSATIONS)) CASES.push([f.name, engine, mode, conv, kw]);
  }
}

const summary: string[] = [];
afterAll(() => {
  if (summary.length) console.log(`family fidelity (exact / refused cuts):\n${summary.join('\n')}`);
});

describe.each(CASES)('%s on %s (%s, %s)', (name, engine, mode, conv, kw) => {
  const family = FAMILIES.find((f) => f.name === name) as ModelFamily;
  const rule = family.engines[engine];
  it(`every cut is exact or refused${rule.phases.length ? ` (claims ${rule.phases.join(' + ')})` : ' (unsupported)'}`, async () => {
    const { skipped, cuts, fakeDiffers } = await runCase(family, engine, kw, CONVERSATIONS[conv]);
    expect({ fakeEngineSplitDiffersFromSglang: fakeDiffers }).toEqual({ fakeEngineSplitDiffersFromSglang: false });
    if (skipped) {
      summary.push(`  ${name} ${engine} ${mode} ${conv}: ${skipped}`);
      return;
    }
    const inexact = cuts.filter((c) => c.kind === 'inexact');
    const thinkingHere = family.thinking({ chatTemplateKwargs: kw ?? {}, reasoningEffort: undefined }, engine);
    const claimedHere = () => rule.thinkingOnly === undefined || rule.thinkingOnly === thinkingHere;
    expect(inexact).toEqual([]);
    // A phase the table claims is continued exactly at its cuts (a guard may refuse a cut at whitespace the
    // template would change; never every cut of a claimed phase).
    for (const phase of rule.phases.filter(claimedHere)) {
      // A rule may refuse a whole conversation its template renders differently (Mistral's system prompt).
      const inPhase = cuts.filter(
        (c) => c.phase === phase && !(c.kind === 'refused' && c.detail.endsWith('conversation-rendered-differently')),
      );
      if (inPhase.length > 0 && !inPhase.some((c) => c.kind === 'exact')) expect({ phase, noExactCut: inPhase }).toBeUndefined();
    }
    // And what it does not claim is refused, never attempted.
    const thinking = family.thinking({ chatTemplateKwargs: kw ?? {}, reasoningEffort: undefined }, engine);
    const claimed = (p: Phase) => rule.phases.includes(p) && (rule.thinkingOnly === undefined || rule.thinkingOnly === thinking);
    for (const c of cuts) if (!claimed(c.phase)) expect(c).toMatchObject({ kind: 'refused' });
    const exact = cuts.filter((c) => c.kind === 'exact').length;
    summary.push(`  ${name} ${engine} ${mode} ${conv}: ${exact}/${cuts.length} exact`);
  });
});
