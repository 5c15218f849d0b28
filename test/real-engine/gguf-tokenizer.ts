// SmolLM2's tokenizer.json, rebuilt from the GGUF the real-engine suite serves: the HF file is not in any registry
// this project may reach, and the GGUF carries what it was converted from (llama.cpp's convert_hf_to_gguf.py):
// the vocabulary in id order, the BPE merges, the token types (3 = control: the added special tokens). Read with
// Hugging Face's own GGUF parser (@huggingface/gguf). The pre-tokenizer is the one llama.cpp runs for
// `tokenizer.ggml.pre = smollm` (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM: `\p{N}`, then GPT-2's
// pattern): in tokenizer.json terms, Digits(individual) then ByteLevel. A stand-in for the published file, not
// a copy: test/real-engine/tokenizer.test.ts holds it to llama-server's own /tokenize on every text it counts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gguf } from '@huggingface/gguf';

const CONTROL = 3;
const USER_DEFINED = 4;

/**
 * Writes `<dir>/tokenizer.json` from a gpt2-model, smollm-pre GGUF, and `<dir>/tokenizer_config.json` with the special
 * tokens the GGUF names (bos/eos/unk/padding ids: what a chat template reads as bos_token, eos_token, ..., as in the
 * model directory an engine loads); returns `dir`.
 */
export async function tokenizerFromGguf(model: string, dir: string): Promise<string> {
  const { metadata } = await gguf(model, { allowLocalFile: true });
  const m = metadata as unknown as Record<string, unknown>;
  if (m['tokenizer.ggml.model'] !== 'gpt2' || m['tokenizer.ggml.pre'] !== 'smollm')
    throw new Error(
      `${model}: tokenizer ${String(m['tokenizer.ggml.model'])}/${String(m['tokenizer.ggml.pre'])}, only gpt2/smollm is rebuilt`,
    );
  const tokens = m['tokenizer.ggml.tokens'] as string[];
  const types = m['tokenizer.ggml.token_type'] as number[];
  const merges = m['tokenizer.ggml.merges'] as string[];
  const added = tokens
    .map((content, id) => ({ content, id, type: types[id] }))
    .filter((t) => t.type === CONTROL || t.type === USER_DEFINED)
    .map((t) => ({
      id: t.id,
      content: t.content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: t.type === CONTROL,
    }));
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Digits', individual_digits: true },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab: Object.fromEntries(tokens.map((t, i) => [t, i])),
      merges,
    },
  };
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  const special: Record<string, string> = {};
  for (const [key, name] of [
    ['bos_token', 'bos'],
    ['eos_token', 'eos'],
    ['unk_token', 'unknown'],
    ['pad_token', 'padding'],
  ]) {
    const id = m[`tokenizer.ggml.${name}_token_id`];
    if (typeof id === 'number' && tokens[id] !== undefined) special[key] = tokens[id];
  }
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(special));
  return dir;
}
