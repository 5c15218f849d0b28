// The checkpoint records (test/fidelity/checkpoints.ts) against the template files at hand: every base file
// exists and still has the bytes the records were checked against, and every derive still applies. A llama.cpp
// update that changes a base file fails here, naming the file, so docs/checkpoint-templates.md is re-checked
// before the family table trusts it. The files come from scripts/llama-cpp-assets.sh (cached after the first run).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { removeOnce, replaceOnce } from '../../fidelity/checkpoint-form';
import { CHECKPOINTS, checkpointForm } from '../../fidelity/checkpoints';
import { provisionAssets } from '../../fidelity/harness-client';

jest.setTimeout(10 * 60 * 1000);

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

// The bytes of each base file as checked (llama.cpp at node-llama-cpp 3.21.1's commit 80fb11ac73e6).
const BASE_SHA256: Record<string, string> = {
  'Qwen-Qwen3-0.6B.jinja': '87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5',
  'Qwen-QwQ-32B.jinja': '5ed15374ce53e19a7798710736a2c9fe41c79f7385e8421a2080d6575a80ef1b',
  'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja': 'dd2675619a64a449cdcdd2b93e605a0a50764cee41e344f244752bc93643936c',
  'Kimi-K2-Instruct.jinja': '1d396d5b128cdb9b2a4ef73434fa08d31c75604a11daa77bcb4b622d32dddd41',
  'google-gemma-4-31B-it.jinja': '85a08664d16d8f3be4416c92427b3ac10df1024ac566cc0b4bc3bab409393f98',
  'mistralai-Ministral-3-14B-Reasoning-2512.jinja': '39f03c383413f531fd302c06c7e982ad98c83f0657a8339ae25478ccb81fdcda',
  'ibm-granite-granite-3.3-2B-Instruct.jinja': '3c71df5f659987462c882bf9e295b597dc19902467a7312ea382c5896681bc02',
  'ibm-granite-granite-4.0.jinja': '9524df67b77a7b25a2dfee898f75b316a157eb9d855b51e32aeac79d7c8a83ce',
  'ibm-granite-granite-4.1.jinja': 'fed2756d2d24e127b951dcf139d0b03ab7db8ef23a456128ebc9c2db4901d476',
  'NVIDIA-Nemotron-Nano-v2.jinja': '52ae8e50fa083e63a0a5726eeffc85502089b82064aceb1bddf0366f7317b3f8',
  'NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja': 'ab7813c3abdd9cb655905a410728b26c7884eca45ddfab8d9f931553485a7862',
};

// derive(base) as checked. QwQ's is also the sha256 of llama.cpp models/templates/Qwen-QwQ-32B.jinja@f5cd27b71da3,
// the get_chat_template.py output of Qwen/QwQ-32B: the derived form is those published bytes.
const DERIVED_SHA256: Record<string, string> = {
  'Qwen/QwQ-32B': '16488ad69d85833e5f66c50174f39834b688343337e9337f018deaa21b354117',
  'Qwen/Qwen3-235B-A22B-Thinking-2507': '988de5f54bddd1c0ddeaa7781860415c8a25800a0ae7008cf5b93fd2148d48a3',
};

let templates: string;
beforeAll(() => {
  templates = provisionAssets().templates;
});

const read = (file: string): string => readFileSync(path.join(templates, file), 'utf8');

/** The derived form of a checkpoint's record from its base file at hand. */
function derived(id: string): string {
  const c = checkpointForm(id);
  if (!c?.derive || !c.base) throw new Error(`${id} has no derived form`);
  return c.derive(read(c.base));
}

describe('the checkpoint records', () => {
  it('name every checkpoint once, with evidence, and a form only where one is at hand', () => {
    const ids = CHECKPOINTS.flatMap((c) => [c.checkpoint, ...c.names].map((id) => id.toLowerCase()));
    expect(new Set(ids).size).toBe(ids.length);
    for (const c of CHECKPOINTS) {
      expect(c.evidence.length).toBeGreaterThan(0);
      if (c.base === null) {
        expect([c.checkpoint, c.identical, c.derive, c.equivalence]).toEqual([c.checkpoint, false, undefined, 'none']);
      } else {
        expect([c.checkpoint, c.equivalence]).not.toEqual([c.checkpoint, 'none']);
        if (c.identical) expect([c.checkpoint, c.derive, c.equivalence]).toEqual([c.checkpoint, undefined, 'bytes']);
      }
    }
    expect(checkpointForm('qwen/qwen3-30b-a3b-thinking-2507')?.checkpoint).toBe('Qwen/Qwen3-235B-A22B-Thinking-2507');
    expect(checkpointForm('deepseek-ai/DeepSeek-R1-Distill-Qwen-32B')?.base).toBe('deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
    expect(checkpointForm('nobody/unknown')).toBeUndefined();
  });

  it('have every base file at hand, with the bytes it was checked against', () => {
    for (const c of CHECKPOINTS.filter((x) => x.base !== null)) {
      const file = c.base as string;
      expect([c.checkpoint, existsSync(path.join(templates, file))]).toEqual([c.checkpoint, true]);
      // A different hash means llama.cpp changed the file: re-check its row in docs/checkpoint-templates.md.
      expect([file, sha256(read(file))]).toEqual([file, BASE_SHA256[file]]);
    }
  });

  it('derive every derived form from its base, to the bytes checked', () => {
    const derived = CHECKPOINTS.filter((c) => c.derive);
    expect(derived.map((c) => c.checkpoint).sort()).toEqual(Object.keys(DERIVED_SHA256).sort());
    for (const c of derived) {
      const base = read(c.base as string);
      const form = (c.derive as (b: string) => string)(base);
      expect(form).not.toBe(base);
      expect([c.checkpoint, sha256(form)]).toEqual([c.checkpoint, DERIVED_SHA256[c.checkpoint]]);
      // A derive refuses a base that lacks its fragment instead of returning it unchanged.
      expect(() => (c.derive as (b: string) => string)('{{- messages }}')).toThrow(/expected exactly one/);
    }
  });

  it('derive the published generation prompts: QwQ and Thinking-2507 open `<think>` unconditionally', () => {
    const qwq = derived('Qwen/QwQ-32B');
    expect(qwq).not.toContain('enable_thinking');
    expect(qwq.endsWith("{{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}\n")).toBe(true);
    const form = derived('Qwen/Qwen3-235B-A22B-Thinking-2507');
    expect(form).not.toContain('enable_thinking');
    expect(form).toContain("{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}");
    // The R1 distills' form at hand opens `<think>\n` with no switch (the Qwen-32B copy closes it unless enable_thinking).
    const r1 = read('deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
    expect(r1).toContain("{{'<｜Assistant｜><think>\\n'}}\n{%- endif %}");
    expect(r1).not.toContain('enable_thinking');
  });
});

describe('replaceOnce / removeOnce', () => {
  it('edit exactly one occurrence and refuse a missing or repeated fragment', () => {
    expect(replaceOnce('a-b-c', '-b-', '+')).toBe('a+c');
    expect(removeOnce('a$&b', '$&')).toBe('ab');
    expect(replaceOnce('x', 'x', '$&$&')).toBe('$&$&');
    expect(() => replaceOnce('abc', 'z', '')).toThrow('found 0');
    expect(() => removeOnce('aa', 'a')).toThrow('found 2');
  });
});
