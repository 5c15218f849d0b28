// Leg 2's prompt on a REAL llama-server with a reasoning family's real chat template (--chat-template-file, the
// DeepSeek-R1 distills' template from llama.cpp's models/templates): for a cut after every streamed chunk of a
// real greedy answer, the leg 2 request the gateway builds (planContinuationRequest, CONTINUATION_ENGINE
// llamacpp) must render through /apply-template as the uninterrupted request's prompt followed by the raw text
// the model generated up to the cut. The raw text comes from llama-server's native /completion on the
// uninterrupted prompt (no chat parsing); the delivered parts from its chat stream (its own reasoning parser).
//
// SmolLM2-135M does not know the R1 format: it never closes the think block the generation prompt opens, so
// every cut is inside the reasoning (thinking on), or in the content (thinking off). The template, the
// rendering and the parser are llama.cpp's; only the weights are not an R1 model's.
import * as path from 'node:path';
import { request } from 'undici';
import { planContinuationRequest } from '../../src/recovery/continuation-request';
import { provisionAssets } from '../fidelity/harness-client';
import { type LlamaReplica, locateAssets, startReplicas } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };
const MAX_TOKENS = 24;

async function post(url: string, body: unknown): Promise<any> {
  const r = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${url} answered ${r.statusCode}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** The chat stream's parts, chunk by chunk (llama-server's own reasoning parser). */
async function streamParts(url: string, body: unknown): Promise<Array<{ reasoning: string; content: string }>> {
  const r = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  const text = await r.body.text();
  const out: Array<{ reasoning: string; content: string }> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const d = JSON.parse(line.slice(6)).choices?.[0]?.delta ?? {};
    const part = { reasoning: d.reasoning_content ?? '', content: d.content ?? '' };
    if (part.reasoning || part.content) out.push(part);
  }
  return out;
}

const describeReal = 'skip' in located ? describe.skip : describe;
if ('skip' in located && underOwnConfig) console.warn(`template-continuation: skipped: ${located.skip}`);

describeReal('leg 2 prompt through a real reasoning template on llama-server (/apply-template)', () => {
  let replica: LlamaReplica;
  beforeAll(async () => {
    if ('skip' in located) return;
    const templates = provisionAssets().templates;
    [replica] = await startReplicas(located.assets, 1, {
      parallel: 1,
      extraArgs: ['--jinja', '--chat-template-file', path.join(templates, 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja')],
    });
  });
  afterAll(async () => {
    await replica?.stop();
  });

  test.each([
    ['thinking on: every cut inside the reasoning', { enable_thinking: true }],
    ['thinking off: every cut in the content', { enable_thinking: false }],
  ])('%s', async (_label, kwargs) => {
    const body = {
      model: 'm',
      stream: true,
      temperature: 0,
      max_tokens: MAX_TOKENS,
      chat_template_kwargs: kwargs,
      messages: [
        { role: 'system', content: 'Answer briefly.' },
        { role: 'user', content: 'Why is the sky blue? 你好' },
      ],
    };
    const p1: string = (await post(`${replica.url}/apply-template`, body)).prompt;
    const raw: string = (
      await post(`${replica.url}/completion`, { prompt: p1, n_predict: MAX_TOKENS, temperature: 0, cache_prompt: false })
    ).content;
    const parts = await streamParts(replica.url, body);
    expect(parts.length).toBeGreaterThan(3);
    const results: string[] = [];
    let exactCuts = 0;
    for (let k = 1; k < parts.length; k++) {
      const delivered = {
        reasoning: parts
          .slice(0, k)
          .map((p) => p.reasoning)
          .join(''),
        content: parts
          .slice(0, k)
          .map((p) => p.content)
          .join(''),
      };
      // The client's budget is far above the cut: leg 2 is planned as for a long answer.
      const plan = planContinuationRequest(
        { ...body, max_tokens: 400 },
        { ...delivered, toolCallsSeen: false },
        { continuationModel: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', engine: 'llamacpp', rates: { cjk: 1.6, other: 4 } },
      );
      // What the gateway would send, and, where the family table refuses the cut, the structured request it
      // refuses: that one must be inexact here (the refusal is measured, not assumed).
      const refused = plan.kind === 'skip';
      if (refused && (plan.reason !== 'continuation-unsupported' || kwargs.enable_thinking)) throw new Error(`cut ${k}: ${plan.reason}`);
      const leg2 = refused
        ? {
            ...body,
            messages: [
              ...body.messages,
              { role: 'assistant', content: delivered.content, reasoning_content: delivered.reasoning || undefined },
            ],
            continue_final_message: true,
            add_generation_prompt: false,
          }
        : plan.body;
      const p2: string = (await post(`${replica.url}/apply-template`, leg2)).prompt;
      const continued = p2.startsWith(p1) ? p2.slice(p1.length) : null;
      const exact = continued !== null && continued.length > 0 && raw.startsWith(continued);
      if (exact === refused)
        results.push(
          `cut ${k}: ${refused ? 'refused, yet' : 'sent, but'} the prompt ends ${JSON.stringify(p2.slice(-60))}; raw ${JSON.stringify(raw.slice(0, 60))}`,
        );
      else exactCuts += exact ? 1 : 0;
    }
    console.log(
      `${_label}: ${exactCuts}/${parts.length - 1} cuts continued, each rendering as prompt + raw text; the rest refused, each inexact here`,
    );
    expect(results).toEqual([]);
  });
});
