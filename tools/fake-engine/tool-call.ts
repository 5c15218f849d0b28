// Deterministic tool call used instead of content when the request offers tools: a gateway must see
// tool-call chunks (and decide not to continue them), so they have to look like an engine's.
import { conversationSeed } from './answer';

export interface ToolCallPlan {
  id: string;
  name: string;
  /** The JSON arguments split into the fragments streamed one chunk each. */
  argumentChunks: string[];
}

const VALUES = ['alpha', 'beta', 'gamma', 'delta', 'stream', 'replica'];

/** Arguments follow the tool's declared properties (up to three) so they look plausible to a client. */
function argumentsFor(tool: any, seed: number): Record<string, unknown> {
  const props = tool?.function?.parameters?.properties;
  const names = props && typeof props === 'object' ? Object.keys(props).slice(0, 3) : [];
  if (names.length === 0) return { query: `${VALUES[seed % VALUES.length]} ${VALUES[(seed >>> 8) % VALUES.length]}` };
  const args: Record<string, unknown> = {};
  names.forEach((name, i) => {
    const type = props[name]?.type;
    const v = (seed >>> (i * 5)) & 0xffff;
    if (type === 'integer' || type === 'number') args[name] = v % 100;
    else if (type === 'boolean') args[name] = v % 2 === 0;
    else args[name] = `${VALUES[v % VALUES.length]} ${VALUES[(v >>> 3) % VALUES.length]}`;
  });
  return args;
}

export function toolCallFor(messages: any[], tool: any): ToolCallPlan {
  const seed = conversationSeed(messages);
  const json = JSON.stringify(argumentsFor(tool, seed));
  const chars = Array.from(json);
  const argumentChunks: string[] = [];
  for (let i = 0; i < chars.length; i += 6) argumentChunks.push(chars.slice(i, i + 6).join(''));
  return {
    id: `call_${seed.toString(16).padStart(8, '0')}`,
    name: String(tool?.function?.name ?? 'tool'),
    argumentChunks,
  };
}
