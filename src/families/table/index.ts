// The model-family table: for every checkpoint whose own template an entry was proven against, how its model
// writes an answer and how each engine must be asked to continue it so that the engine's prompt is the
// uninterrupted prompt plus the raw text the model had generated. Each cell is proven by
// test/unit/families/fidelity.test.ts against the checkpoint's template (llama.cpp's copy, or the published form
// where that differs: test/fidelity/checkpoints.ts), rendered the way the engine renders it; a cell that cannot
// be rendered exactly is unsupported, and such a stream ends with the interruption event. A name selects an
// entry only for the checkpoints whose template that is; any other model takes CHAT_TEMPLATE's template path,
// or the generic guess (src/families/select.ts). Background: docs/families.md.
import type { ModelFamily } from '../types';
import { deepseekR1Distill, deepseekV4, deepseekV31, deepseekV32 } from './deepseek';
import { gemma4 } from './gemma';
import { glm46, glm47, kimiK2Instruct, kimiK2Thinking, kimiK3, minimaxM2 } from './glm-kimi-minimax';
import { gemma2, gptOss, granite40, granite41, llama3, llama32, mistral, nemotron3Nano, plain } from './others';
import { qwen3, qwen3Coder, qwen3Instruct2507, qwen3Thinking2507, qwen25, qwen35, qwq } from './qwen';

/** Searched in order; the first match wins (select.ts). */
export const FAMILIES: readonly ModelFamily[] = Object.freeze([
  qwen35,
  qwen3Thinking2507,
  qwen3Instruct2507,
  qwen3Coder,
  qwen3,
  qwq,
  qwen25,
  glm46,
  glm47,
  deepseekV31,
  deepseekV32,
  deepseekV4,
  deepseekR1Distill,
  kimiK2Thinking,
  kimiK2Instruct,
  kimiK3,
  gptOss,
  minimaxM2,
  llama3,
  llama32,
  mistral,
  gemma2,
  gemma4,
  granite40,
  granite41,
  nemotron3Nano,
  plain,
]);
