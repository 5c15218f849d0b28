// TOKENIZER: the model's own tokenizer, loaded once in process, so that a continuation is counted exactly (usage,
// leg 2's budget) with no round trip and no service to run. The file is the model directory's tokenizer.json, the
// one an engine loads through transformers (the same mount as CHAT_TEMPLATE's directory, src/templates/source.ts),
// or a tokenizer.json named directly.
//
// Counted with Hugging Face's `tokenizers` (npm, the Node binding of the Rust crate that transformers' fast
// tokenizers are, and so SGLang's and vLLM's): the engines' own code, not a reimplementation; its encode runs on
// libuv's thread pool, off the event loop. Chosen by measurement over the pure-JS `@huggingface/tokenizers` and
// `tiktoken` (docs/performance.md, "Counting in process (TOKENIZER)").
//
// What a count is: the tokens of a text as the engine reads it in a prompt, special-token text (`<think>`,
// `<|im_start|>`) matched as the added tokens it is, no BOS or EOS added: what /tokenize answers with
// add_special_tokens false (src/upstream/tokenizer.ts).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ERROR_CODES, GatewayError } from '../errors';

export class ModelTokenizerError extends GatewayError {
  readonly code = ERROR_CODES.tokenizer;
}

/** Counts a text's tokens. */
export interface TextTokenizer {
  /** The file it was loaded from, for the log. */
  readonly origin: string;
  count(text: string): Promise<number>;
}

/** The tokenizer.json TOKENIZER names: the file itself, or the one in the model directory. */
export function tokenizerFile(setting: string): string {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(setting);
  } catch (e) {
    throw new ModelTokenizerError(`${setting}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
  if (!stat.isDirectory()) return setting;
  const file = path.join(setting, 'tokenizer.json');
  if (!fs.existsSync(file)) throw new ModelTokenizerError(`${setting} holds no tokenizer.json`);
  return file;
}

/**
 * At start (src/config/env.ts), cheaply: the file exists, can be read and opens a JSON object, else a line naming
 * the variable. Only its first bytes are read: parsing a 10-30 MB tokenizer.json here as well as in the library
 * left 50-125 MiB more resident in every process (measured with Qwen3's and gpt-oss's files, docs/deploy.md). The
 * sidecar then loads it (loadModelTokenizer), which checks the rest and stops it with a TOKENIZER line too.
 */
export function checkTokenizerSetting(setting: string | undefined): string | undefined {
  if (setting === undefined) return undefined;
  try {
    const file = tokenizerFile(setting);
    if (!/^\s*\{/.test(readHead(file, 4096).replace(/^\uFEFF/, '')))
      throw new ModelTokenizerError(`${file} is not a tokenizer.json (not a JSON object)`);
    return undefined;
  } catch (e) {
    if (e instanceof ModelTokenizerError) return `config error: TOKENIZER ${e.message}`;
    throw e;
  }
}

/** The first `bytes` of a file, as text. */
function readHead(file: string, bytes: number): string {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    throw new ModelTokenizerError(`${file}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
  try {
    const buf = Buffer.alloc(bytes);
    return buf.subarray(0, fs.readSync(fd, buf, 0, bytes, 0)).toString('utf8');
  } catch (e) {
    throw new ModelTokenizerError(`${file}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  } finally {
    fs.closeSync(fd);
  }
}

type TokenizersBinding = typeof import('tokenizers');

/**
 * The `tokenizers` native binding. On a platform it ships no build for (or a damaged install) its loader throws
 * npm's words about optional dependencies: that becomes a TOKENIZER error naming the platform, so the sidecar
 * stops at start with a line an operator can act on (unset TOKENIZER: /tokenize or the estimate count instead).
 */
export function tokenizersBinding(load: () => unknown = () => require('tokenizers')): TokenizersBinding {
  try {
    return load() as TokenizersBinding;
  } catch (e) {
    const why = e instanceof Error ? e.message.split('\n')[0].slice(0, 200) : 'unknown';
    throw new ModelTokenizerError(`the tokenizers native binding does not load on ${process.platform}-${process.arch} (${why})`);
  }
}

/** Loads TOKENIZER (about 0.7 s; 150 MiB more peak RSS for a 150k vocabulary, docs/deploy.md). Throws ModelTokenizerError naming the file. */
export function loadModelTokenizer(setting: string, binding: () => TokenizersBinding = tokenizersBinding): TextTokenizer {
  const file = tokenizerFile(setting);
  // Loaded when TOKENIZER is set only: a deployment without it never loads the native module.
  let Tokenizer: TokenizersBinding['Tokenizer'];
  try {
    ({ Tokenizer } = binding());
  } catch (e) {
    throw e instanceof ModelTokenizerError ? new ModelTokenizerError(`${file} cannot be used: ${e.message}`) : e;
  }
  let tok: import('tokenizers').Tokenizer;
  try {
    tok = Tokenizer.fromFile(file);
  } catch (e) {
    throw new ModelTokenizerError(`${file} cannot be loaded as a tokenizer (${e instanceof Error ? e.message.split('\n')[0] : 'unknown'})`);
  }
  return {
    origin: file,
    async count(text: string): Promise<number> {
      if (!text) return 0;
      return (await tok.encode(text, null, { addSpecialTokens: false })).getLength();
    },
  };
}

/** What a continuation counts (src/upstream/tokenizer.ts countRecoveredTokens). */
export interface TokenizerInput {
  reasoning: string;
  content: string;
  /** The raw text leg 2's prompt continues from. */
  prefix: string;
  /** The prefix is what the model generated (a known family's raw text, markers included). */
  prefixIsGenerated: boolean;
  /** The engine's prompt for the original request (the served template's rendering), when known. */
  promptText?: string;
}

/** The in-process counts; `promptTokens` only when the engine's prompt text was given. */
export async function countWithTokenizer(tok: TextTokenizer, i: TokenizerInput) {
  const [reasoningTokens, contentTokens, prefixTokens, promptTokens] = await Promise.all([
    tok.count(i.reasoning),
    tok.count(i.content),
    tok.count(i.prefix),
    i.promptText === undefined ? undefined : tok.count(i.promptText),
  ]);
  const generated = i.prefixIsGenerated && i.prefix ? prefixTokens : reasoningTokens + contentTokens;
  return {
    // The markers count with the reasoning they delimit.
    reasoningTokens: i.prefixIsGenerated && i.prefix ? Math.max(0, generated - contentTokens) : reasoningTokens,
    contentTokens,
    totalRecovered: generated,
    prefixTokens,
    promptTokens,
  };
}
