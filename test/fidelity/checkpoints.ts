// Each checkpoint's OWN published chat template, and how it relates to the template files at hand (llama.cpp's
// models/templates copies, scripts/llama-cpp-assets.sh): byte-identical, derived by a documented minimal edit,
// rendering-equivalent, unverified, or not at hand. Data only, no I/O; the unit test
// test/unit/families/checkpoints.test.ts checks every base still exists, is unchanged, and every derive still applies.
// Method, table and sources: docs/checkpoint-templates.md.
import type { CheckpointForm } from './checkpoint-form';
import { KIMI_GEMMA_LLAMA } from './checkpoints-kimi-gemma-llama';
import { OTHERS } from './checkpoints-others';
import { QWEN_DEEPSEEK } from './checkpoints-qwen-deepseek';

export type { CheckpointForm, Equivalence } from './checkpoint-form';

export const CHECKPOINTS: readonly CheckpointForm[] = Object.freeze([...QWEN_DEEPSEEK, ...KIMI_GEMMA_LLAMA, ...OTHERS]);

/** The form for a Hugging Face id (its own entry or one whose names list it), or undefined. */
export function checkpointForm(id: string): CheckpointForm | undefined {
  const wanted = id.toLowerCase();
  return CHECKPOINTS.find((c) => c.checkpoint.toLowerCase() === wanted || c.names.some((n) => n.toLowerCase() === wanted));
}
