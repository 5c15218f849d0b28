// What the demo (`npm run demo`, no DOWNSTREAM_URL) runs: the configuration a careful operator would, so that its
// first screen warns of nothing that is not wrong.
//  - CONTINUATION_MODEL unset: the fake engines serve tools/fake-engine/demo-model/chat_template.jinja (ChatML
//    with a `<think>` generation prompt, in the form of Qwen/QwQ-32B's) and the sidecar reads the same file as
//    CHAT_TEMPLATE: every continuation is designed from that template and verified against it before it is sent
//    (FAMILY_TEMPLATE_PATH), and the engines answer a continuation only when its prompt is exactly the template's
//    (tools/fake-engine/template-model.ts). No FAMILY_UNKNOWN, no CONTINUATION_UNCHECKED.
//  - CONTINUATION_MODEL set: the engines speak that family (`CONTINUATION_MODEL=Qwen/Qwen3-32B`: Qwen3's <think>
//    format); the sidecar's warnings then say what that configuration lacks, as they would in production.
//  - TOKENIZE_DIALECT is the engines' own: with `auto` the sidecar probes /tokenize with a chat body first, which
//    SGLang (and so the fake engine in its dialect) answers 400: a failed request in Envoy's log for nothing.
import * as path from 'node:path';
import { selectFamily } from '../../src/families/select';

/** The demo's model name: one no family entry knows, so that its continuations follow the template. */
export const DEMO_MODEL = 'fake-engine/demo-reasoner';

export interface DemoConfig {
  /** Set on the sidecar's environment. */
  readonly sidecarEnv: Record<string, string>;
  /** The fake engine's flags beyond port, name and faults. */
  readonly engineArgs: readonly string[];
  /** What the stack says about it, one line each. */
  readonly lines: readonly string[];
}

/** `repo`: the checkout (the template file is read from tools/, not dist/). */
export function demoConfig(env: NodeJS.ProcessEnv, repo: string, dialect: 'sglang' | 'vllm'): DemoConfig {
  const sidecarEnv: Record<string, string> = {};
  const lines: string[] = [];
  if (!env.TOKENIZE_DIALECT?.trim()) sidecarEnv.TOKENIZE_DIALECT = dialect;
  const model = env.CONTINUATION_MODEL?.trim();
  if (!model) {
    const template = path.join(repo, 'tools', 'fake-engine', 'demo-model', 'chat_template.jinja');
    sidecarEnv.CONTINUATION_MODEL = DEMO_MODEL;
    sidecarEnv.CHAT_TEMPLATE = env.CHAT_TEMPLATE?.trim() || template;
    lines.push(
      `demo: CONTINUATION_MODEL=${DEMO_MODEL} CHAT_TEMPLATE=${sidecarEnv.CHAT_TEMPLATE}: the fake engines serve that template, and every continuation is verified against it`,
    );
    return { sidecarEnv, engineArgs: ['--chat-template', sidecarEnv.CHAT_TEMPLATE, '--reasoning-parser', 'markers'], lines };
  }
  // The fake engines speak the family CONTINUATION_MODEL names, or the generic one when it names none.
  const named = selectFamily(model);
  const family = named.known && named.family.name !== 'generic' ? named.family.name : 'generic';
  lines.push(`demo: the fake engines speak the ${family} family`);
  return { sidecarEnv, engineArgs: ['--family', family], lines };
}
