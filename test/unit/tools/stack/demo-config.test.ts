import * as path from 'node:path';
import { DEMO_MODEL, demoConfig } from '../../../../tools/stack/demo-config';

const REPO = '/repo';
const TEMPLATE = path.join(REPO, 'tools', 'fake-engine', 'demo-model', 'chat_template.jinja');

describe("the demo's configuration: what a careful operator would run", () => {
  it('unset CONTINUATION_MODEL: the engines serve the demo template, the sidecar verifies against the same file', () => {
    const c = demoConfig({}, REPO, 'sglang');
    expect(c.sidecarEnv).toEqual({ TOKENIZE_DIALECT: 'sglang', CONTINUATION_MODEL: DEMO_MODEL, CHAT_TEMPLATE: TEMPLATE });
    expect(c.engineArgs).toEqual(['--chat-template', TEMPLATE, '--reasoning-parser', 'markers']);
  });

  it("a family named: the engines speak it, and the sidecar's own warnings say what the setting lacks", () => {
    const c = demoConfig({ CONTINUATION_MODEL: 'Qwen/Qwen3-32B' }, REPO, 'vllm');
    expect(c.sidecarEnv).toEqual({ TOKENIZE_DIALECT: 'vllm' });
    expect(c.engineArgs).toEqual(['--family', 'qwen3']);
  });

  it("the user's own TOKENIZE_DIALECT and CHAT_TEMPLATE stay theirs", () => {
    const c = demoConfig({ TOKENIZE_DIALECT: 'auto', CHAT_TEMPLATE: '/models/x' }, REPO, 'sglang');
    expect(c.sidecarEnv.TOKENIZE_DIALECT).toBeUndefined();
    expect(c.sidecarEnv.CHAT_TEMPLATE).toBe('/models/x');
    expect(c.engineArgs).toEqual(['--chat-template', '/models/x', '--reasoning-parser', 'markers']);
  });
});
