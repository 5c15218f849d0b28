// The sidecar's renderer (src/templates/renderer.ts: @huggingface/jinja with transformers' environment restated)
// against transformers 5.19.0's render_jinja_template, the renderer SGLang and vLLM call: every template of
// llama.cpp's copy, conversations with the whitespace templates strip or keep, with and without a generation
// prompt and a continued final message, with thinking settings and a fixed clock. The texts must be equal, or
// both sides refuse; the templates the JavaScript engine cannot evaluate are named, and raise
// TemplateRenderError (the template path then refuses every continuation).
import * as fs from 'node:fs';
import { ChatTemplate, TemplateRenderError } from '../../../src/templates/renderer';
import { Harness, provisionAssets } from '../../fidelity/harness-client';

jest.setTimeout(10 * 60 * 1000);

/** The templates @huggingface/jinja 0.5.13 cannot evaluate, and why (both sides render them otherwise). */
const NOT_EVALUATED: Record<string, string> = {
  'ByteDance-Seed-OSS.jinja': 'a dict with integer keys',
  'meetkai-functionary-medium-v3.1.jinja': 'selectattr on tools that are None',
  'tencent-Hy3.jinja': 'a call of an undefined function',
};

const USER = { role: 'user', content: 'What is the answer?' };
const CONVERSATIONS: Array<Array<Record<string, unknown>>> = [
  [USER],
  [{ role: 'system', content: 'Be brief.' }, USER],
  [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }, USER],
];
// Final assistant turns: whitespace at both ends, reasoning with and without markers in the content, a tab, NEL.
const FINALS: Array<Record<string, unknown> | null> = [
  null,
  { role: 'assistant', content: 'The answer is 42. ' },
  { role: 'assistant', content: '\n\nThe answer\t', reasoning_content: '\nLet me think \n', reasoning: '\nLet me think \n' },
  { role: 'assistant', content: '<think>\nLet me think\n</think>\n\nThe ans ' },
  { role: 'assistant', content: ' x\u0085', reasoning_content: 'r', reasoning: 'r' },
];
const KWARGS: Array<Record<string, unknown>> = [{}, { enable_thinking: false }, { thinking: true, enable_thinking: true }];
const NOW = Date.UTC(2026, 11, 3, 23, 59, 30);

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
  it('renders as transformers renders it', async () => {
    const text = fs.readFileSync(`${dir}/${file}`, 'utf8');
    const t = new ChatTemplate(text);
    const special = { bos_token: '<s>', eos_token: '</s>' };
    const differences: string[] = [];
    let rendered = 0;
    let jsOnlyRefusals = 0;
    for (const conv of CONVERSATIONS)
      for (const final of FINALS)
        for (const kw of KWARGS)
          for (const cfm of final ? [false, true] : [false]) {
            const messages = final ? [...conv, final] : conv;
            const addGenerationPrompt = !final;
            let js: string | undefined;
            try {
              const inputs = { messages, variables: { ...special, ...kw }, now: new Date(NOW) };
              js = cfm ? t.renderContinuation(inputs) : t.render({ ...inputs, addGenerationPrompt });
            } catch (e) {
              expect(e).toBeInstanceOf(TemplateRenderError);
            }
            const py = await harness.call({
              op: 'render',
              template: text,
              messages,
              kwargs: kw,
              special,
              add_generation_prompt: addGenerationPrompt,
              continue_final_message: cfm,
              nowMs: NOW,
            });
            if (js === undefined) {
              if (py.ok) jsOnlyRefusals++;
              continue;
            }
            if (!py.ok) {
              differences.push(
                `transformers refused what we rendered (cfm=${cfm}, ${JSON.stringify(kw)}): ${String(py.error).slice(0, 100)}`,
              );
              continue;
            }
            rendered++;
            if (py.text !== js) {
              let at = 0;
              while (py.text[at] === js[at]) at++;
              differences.push(
                `at ${at} (cfm=${cfm}, ${JSON.stringify(kw)}): ${JSON.stringify(py.text.slice(at, at + 40))} vs ${JSON.stringify(js.slice(at, at + 40))}`,
              );
            }
          }
    expect(differences).toEqual([]);
    if (NOT_EVALUATED[file]) expect({ rendered, jsOnlyRefusals: jsOnlyRefusals > 0 }).toEqual({ rendered: 0, jsOnlyRefusals: true });
    else expect({ jsOnlyRefusals }).toEqual({ jsOnlyRefusals: 0 });
  });
});
