// The requests the gateway sends for a continuation by token ids, through vLLM 0.33.0's own protocol models
// (the venv of scripts/vllm-deps.sh): leg 1 (the client's chat request with `return_token_ids`) must parse as
// a ChatCompletionRequest with that field declared (vLLM's models accept unknown fields with a warning, so
// "parsed" alone would prove nothing), and leg 2 as a CompletionRequest whose prompt is the list of ids, with
// `return_token_ids`, the budget, the seed and stream_options read as sent; and the chunks the fake engine
// streams for this (tools/fake-engine, our reading of vLLM) must parse as vLLM's own stream response models.
// Skipped with a message when the venv is not built (this suite never builds it: npm run test:vllm does).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { leg1Body, leg1IdsDecision } from '../../src/continuation/token-ids/leg1-request';
import { planIdsLeg2 } from '../../src/continuation/token-ids/leg2-request';

const ROOT = path.resolve(__dirname, '../../..');
const python = process.env.VLLM_PYTHON ?? path.join(process.env.VENV_DIR ?? path.join(ROOT, '.venv-vllm'), 'bin', 'python');
const ready = fs.existsSync(python);
if (!ready) process.stderr.write(`token-ids-protocol SKIPPED: no vLLM venv at ${python} (scripts/vllm-deps.sh, or VLLM_PYTHON)\n`);
const describeVllm = ready ? describe : describe.skip;

const CHECK = `
import json, sys, os
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest, ChatCompletionStreamResponse
from vllm.entrypoints.openai.completion.protocol import CompletionRequest, CompletionStreamResponse
from vllm.version import __version__
job = json.load(sys.stdin)
out = {"version": __version__}
chat = ChatCompletionRequest.model_validate(job["leg1"])
out["chat_declares_return_token_ids"] = "return_token_ids" in ChatCompletionRequest.model_fields
out["chat_return_token_ids"] = chat.return_token_ids
comp = CompletionRequest.model_validate(job["leg2"])
out["completion_declares_return_token_ids"] = "return_token_ids" in CompletionRequest.model_fields
out["completion_prompt"] = comp.prompt
out["completion"] = {"max_tokens": comp.max_tokens, "seed": comp.seed, "stream": comp.stream, "return_token_ids": comp.return_token_ids,
                     "include_usage": comp.stream_options.include_usage, "temperature": comp.temperature}
out["chunks"] = [ChatCompletionStreamResponse.model_validate(c).model_dump(exclude_unset=True) for c in job["chat_chunks"]]
out["completion_chunks"] = [CompletionStreamResponse.model_validate(c).model_dump(exclude_unset=True) for c in job["completion_chunks"]]
print(json.dumps(out))
`;

describeVllm("token ids through vLLM 0.33.0's protocol models", () => {
  test('leg 1 and leg 2 as vLLM reads them; the chunk shapes the fake engine streams', () => {
    const original = { model: 'm', stream: true, temperature: 0, seed: 7, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
    const ask = leg1IdsDecision('vllm', true, original);
    if (!('ask' in ask)) throw new Error('vLLM leg 1 not asked for ids');
    const leg1 = JSON.parse(leg1Body(original, ask.ask).toString());
    const plan = planIdsLeg2({ engine: 'vllm', original, promptIds: [1, 2, 3], generatedIds: [4, 5] });
    if (plan.kind !== 'send') throw new Error('no leg 2');
    const base = { id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm' };
    const job = {
      leg1,
      leg2: plan.body,
      chat_chunks: [
        {
          ...base,
          prompt_token_ids: [1, 2, 3],
          choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
        },
        { ...base, choices: [{ index: 0, delta: { content: 'a' }, logprobs: null, finish_reason: null, token_ids: [4] }] },
        { ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: null, token_ids: [5] }] },
      ],
      completion_chunks: [
        {
          id: 'cmpl-x',
          object: 'text_completion',
          created: 1,
          model: 'm',
          choices: [{ index: 0, text: 'b', logprobs: null, finish_reason: null, stop_reason: null, token_ids: [6] }],
        },
        {
          id: 'cmpl-x',
          object: 'text_completion',
          created: 1,
          model: 'm',
          choices: [],
          usage: { prompt_tokens: 5, total_tokens: 6, completion_tokens: 1 },
        },
      ],
    };
    const r = spawnSync(python, ['-c', CHECK], { input: JSON.stringify(job), encoding: 'utf8', timeout: 10 * 60_000 });
    if (r.status !== 0) throw new Error(`vLLM check failed: ${r.stderr.slice(-2000)}`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop() as string);
    expect(out.version).toMatch(/^0\.33\.0/);
    expect(out).toMatchObject({
      chat_declares_return_token_ids: true,
      chat_return_token_ids: true,
      completion_declares_return_token_ids: true,
      completion_prompt: [1, 2, 3, 4, 5],
      completion: { max_tokens: 98, seed: 7, stream: true, return_token_ids: true, include_usage: true, temperature: 0 },
    });
    // vLLM's own models keep every field the fake engine streams (none dropped as unknown).
    expect(out.chunks[0].prompt_token_ids).toEqual([1, 2, 3]);
    expect(out.chunks[1].choices[0].token_ids).toEqual([4]);
    expect(out.completion_chunks[0].choices[0].token_ids).toEqual([6]);
  });
});
