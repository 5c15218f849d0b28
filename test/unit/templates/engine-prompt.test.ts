// Each engine's prompt rule as the sidecar restates it (src/templates/engine-prompt.ts) against the engines' own
// code (test/fidelity/harness.py: SGLang 0.5.23's request model, _handle_last_assistant_message and template
// call; transformers' renderer): every template, original requests and leg 2 bodies (a final assistant message
// continued, with and without reasoning_content), chat_template_kwargs and reasoning_effort.
import * as fs from 'node:fs';
import { enginePrompt } from '../../../src/templates/engine-prompt';
import { ChatTemplate } from '../../../src/templates/renderer';
import { Harness, provisionAssets } from '../../fidelity/harness-client';

jest.setTimeout(10 * 60 * 1000);

const NOW = Date.UTC(2026, 11, 3, 12, 0, 0);
const MESSAGES = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello!', reasoning_content: 'greet' },
  { role: 'user', content: 'What is the answer?' },
];
const BODIES: Array<Record<string, unknown>> = [
  { messages: MESSAGES },
  { messages: MESSAGES, chat_template_kwargs: { enable_thinking: false } },
  { messages: MESSAGES, reasoning_effort: 'none' },
  { messages: MESSAGES, reasoning_effort: 'high', chat_template_kwargs: { thinking: true } },
  {
    messages: [...MESSAGES, { role: 'assistant', content: '<think>\nLet me think\n</think>\n\nThe ans' }],
    continue_final_message: true,
    add_generation_prompt: false,
  },
  {
    messages: [...MESSAGES, { role: 'assistant', content: '\n\nThe ans', reasoning_content: '\nLet me think\n' }],
    continue_final_message: true,
    add_generation_prompt: false,
  },
];

let harness: Harness;
let dir: string;
beforeAll(() => {
  dir = provisionAssets().templates;
  harness = Harness.start();
});
afterAll(async () => {
  await harness?.stop();
});

const files = () => fs.readdirSync(provisionAssets().templates).filter((f) => f.endsWith('.jinja'));

describe.each(files())('%s', (file) => {
  it.each(['sglang', 'vllm'] as const)('%s builds the prompt the engine builds', async (engine) => {
    const text = fs.readFileSync(`${dir}/${file}`, 'utf8');
    const template = new ChatTemplate(text);
    const special = { bos_token: '<s>', eos_token: '</s>' };
    const differences: string[] = [];
    for (const b of BODIES) {
      const body: Record<string, unknown> = { model: 'm', stream: true, ...b };
      let ours: string | undefined;
      try {
        ours = enginePrompt(engine, body, { template, special, now: new Date(NOW) });
      } catch {
        ours = undefined;
      }
      const theirs = await harness.call({ op: `${engine}_prompt`, body, special, template: text, nowMs: NOW });
      if (!theirs.ok || ours === undefined) {
        // A refusal on one side only is a difference unless it is ours (the template path then refuses).
        if (theirs.ok === false && ours !== undefined)
          differences.push(`the engine refused a body we render: ${String(theirs.error).slice(0, 80)}`);
        continue;
      }
      if (theirs.text !== ours)
        differences.push(`${JSON.stringify(b).slice(0, 80)}: differs at ${[...ours].findIndex((c, i) => c !== theirs.text[i])}`);
    }
    expect(differences).toEqual([]);
  });
});
