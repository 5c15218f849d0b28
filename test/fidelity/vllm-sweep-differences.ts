// Where vLLM 0.33.0's own code (the vLLM suite's template sweep, test/fidelity/vllm-sweep.ts) gives another
// verdict than the npm sweep's restatement of vLLM (test/fidelity/template-sweep-expected.json: harness.py's
// prompts and our marker split, tools/fake-engine/marker-split.ts), cell by cell: vLLM's verdicts and why they
// differ. The prompts agree everywhere; every difference is the reasoning parser's split (vLLM's qwen3,
// seed_oss and minimax_m3 do more than remove a marker pair). Neither side drifts: a cut exact on one side is
// refused on the other, or the same cuts fall in another phase. docs/vllm-fidelity-notes.md explains each class.
// A new difference fails the vLLM suite with the cell's verdicts to paste here (`own: {...}`) and a reason.
import type { CellVerdict } from './sweep-expectations';

export interface Difference {
  /** The cell's verdicts through vLLM's own code. */
  readonly own: CellVerdict;
  readonly why: string;
}

/**
 * vLLM's qwen3 parser, and seed_oss which inherits it (vllm/parser/qwen3.py L318, L149-162), reads
 * `chat_template_kwargs.enable_thinking`: false builds it without reasoning (initial state content, no
 * `<think>` transitions), so nothing is split. These templates ignore enable_thinking (or the model still writes
 * its block): the raw text, markers included, arrives as content, and the cell is the no-parser cell (identical
 * verdicts). Our marker split ignores the kwarg and splits.
 */
const THINKING_OFF_NO_SPLIT =
  'qwen3 / seed_oss with enable_thinking false do not split: the markers arrive in the content (= the no-parser cell)';

/**
 * The parser takes an earlier turn's closing marker for the end of this turn's reasoning and hands everything out
 * as content, markers included (= the no-parser cell): qwen3 on GLM-4.6 (its history turn renders
 * `<think></think>`; qwen3's turn boundaries are ChatML's, vllm/parser/qwen3.py L46, L309, which GLM's prompt
 * lacks, so `is_reasoning_end` scans back to that `</think>`, parser/engine/parser_engine.py L712-734), minimax_m3
 * on MiniMax-M3 (no turn boundaries at all: the last `</mm:think>` of the prompt wins,
 * vllm/reasoning/minimax_m3_reasoning_parser.py L313-320). Our marker split starts in the content too, but opens
 * the reasoning at the model's `<think>`.
 */
const EARLIER_TURN_CLOSES =
  "an earlier turn's closing marker ends the reasoning for vLLM's parser: the markers arrive in the content (= the no-parser cell)";

/**
 * vLLM's qwen3 parser with thinking on starts inside the reasoning unless the prompt closed it (initial state
 * reasoning, wait_for_reasoning; parser/engine/parser_engine.py L712-734): a model that writes no `<think>` here
 * (these templates do not open a block and their model answers plainly by default) has its answer handed out as
 * reasoning, which the template path cannot place (refused). Our marker split hands it out as content (exact).
 */
const STARTS_IN_REASONING = 'qwen3 starts in the reasoning when the prompt does not close it: a plain answer arrives as reasoning, refused';

/** The reasons that say vLLM's parser did not split: the cell's verdicts are then the no-parser cell's. */
export const NO_SPLIT_REASONS: readonly string[] = [THINKING_OFF_NO_SPLIT, EARLIER_TURN_CLOSES];

export const VLLM_OWN_DIFFERENCES: Record<string, Record<string, Difference>> = {
  'Bielik-11B-v3.0-Instruct.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'EEEEEEEEEEEEREEEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
  'ByteDance-Seed-OSS.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRRRRRRRRRRR' }, why: THINKING_OFF_NO_SPLIT },
  },
  'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRRRRRRRRRRR' }, why: THINKING_OFF_NO_SPLIT },
  },
  'GLM-4.6.jinja': {
    'vllm parser default': { own: { reasoning: '', content: 'RRRRRRRRRRREREEEEEEEE' }, why: EARLIER_TURN_CLOSES },
  },
  'HuggingFaceTB-SmolLM3-3B.jinja': {
    'vllm parser default': { own: { reasoning: 'RRRRRRRR', content: '' }, why: STARTS_IN_REASONING },
  },
  'ibm-granite-granite-3.3-2B-Instruct.jinja': {
    'vllm parser default': { own: { reasoning: 'RRRRRRRR', content: '' }, why: STARTS_IN_REASONING },
  },
  'Kimi-K2-Thinking.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRRRRRRRRRR' }, why: THINKING_OFF_NO_SPLIT },
  },
  'LFM2.5-8B-A1B.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'EEEEEEEEEEEEEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
  'llama-cpp-deepseek-r1.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRRRRRRRRRRR' }, why: THINKING_OFF_NO_SPLIT },
  },
  'llama-cpp-rwkv-world.jinja': {
    'vllm parser default': { own: { reasoning: 'RRRRRRRRR', content: '' }, why: STARTS_IN_REASONING },
  },
  'MiniMax-M2.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRREEEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
  'MiniMax-M3.jinja': {
    'vllm parser default': { own: { reasoning: '', content: 'RRRRRRRRRREEEEEEEEE' }, why: EARLIER_TURN_CLOSES },
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRREEEEEEEEE' }, why: EARLIER_TURN_CLOSES },
  },
  'NVIDIA-Nemotron-Nano-v2.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRREREEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
  'Qwen/Qwen3-235B-A22B-Thinking-2507 (published form)': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRREEEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
  'Qwen/QwQ-32B (published form)': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRREEEEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
  'Reka-Edge.jinja': {
    'vllm parser default': { own: { reasoning: 'RRRRRRRRR', content: '' }, why: STARTS_IN_REASONING },
  },
  'StepFun3.5-Flash.jinja': {
    'vllm parser thinking-off': { own: { reasoning: '', content: 'RRRRRRRRRRREEEEEEEEE' }, why: THINKING_OFF_NO_SPLIT },
  },
};
