// Decides from the endpoint (the path) and the raw request body whether a stream gets continuation coverage
// (reference server.py should_intervene, for chat). Out of scope means: forwarded untouched, exactly as without the
// gateway. Each endpoint has its own schema and exclusions: chat here, completions in src/openai/completions.ts.
// When in doubt, out of scope: a wrong "no" costs one unrecovered crash, a wrong "yes" can break a stream.

import { z } from 'zod';
import type { Engine } from '../families/types';
import { smallInt } from '../obs/log-values';
import { type ChatRequest, isObject, type JsonObject } from '../openai/chat';
import { type CompletionRequest, type CompletionsSkipReason, completionsScope } from '../openai/completions';
import { hasMultimodalContent } from '../recovery/token-estimate';
import type { Endpoint } from './endpoint';
import { exceedsJsonDepth } from './json-depth';

export type ScopeSkipReason =
  | 'not-json'
  | 'not-chat-request'
  | 'json-too-deep'
  | 'method-not-post'
  | 'not-streaming'
  | 'client-continue-final-message'
  | 'structured-output'
  | 'body-too-large'
  | 'vllm-multimodal'
  | 'continuation-model-unset'
  | 'multiple-choices'
  /** A path no continuation is built for here (`/v1/responses` is decided by src/endpoints/responses/scope.ts), or no endpoint at all. */
  | 'endpoint-not-covered'
  | CompletionsSkipReason;

/** What an in-scope request is, per endpoint: its parsed payload, typed by the endpoint's schema. */
export type InScopeBody =
  | { endpoint: 'chat'; payload: ChatRequest }
  | { endpoint: 'completions'; payload: CompletionRequest }
  // A Responses stream (src/endpoints/responses/scope.ts decides it): its continuation legs are chat requests.
  | { endpoint: 'responses'; payload: ChatRequest };

export type ScopeDecision =
  | ({ inScope: true; multimodal: boolean; bodyBytes: number; structured: boolean } & InScopeBody)
  | { inScope: false; reason: ScopeSkipReason; detail?: string };

// Validation only: the result is discarded and the parsed payload is what we keep, so nothing the client
// sent can be stripped. Loose objects accept every unknown key.
const ChatRequestShape = z.looseObject({
  messages: z.array(z.looseObject({ role: z.string().min(1) })).min(1),
});

// Constrained decoding. The reference checks response_format json_object/json_schema only; we also treat
// structural_tag and the engines' own constraint fields as structured output, since neither engine can
// resume a constrained document part-way: the grammar state is lost with the replica (docs/background.md, rule 4).
const STRUCTURED_FORMATS = new Set(['json_object', 'json_schema', 'structural_tag']);
const CONSTRAINT_FIELDS = [
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'structured_outputs', // vLLM
  'regex',
  'ebnf',
  'json_schema',
  'structural_tag', // SGLang
];

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** MAX_BODY_JSON_DEPTH's default: serde_json's recursion limit, which Rust routers (axum's Json) apply to the same bodies. */
export const DEFAULT_MAX_JSON_DEPTH = 128;

const skip = (reason: ScopeSkipReason, detail?: string): ScopeDecision =>
  detail === undefined ? { inScope: false, reason } : { inScope: false, reason, detail };

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'CONNECT']);

/**
 * From the request headers alone: only a POST can be a chat completion (the reference routes POST only; the
 * engines answer 404 or 405 to anything else). Any other method is proxied natively, body and all, without
 * waiting for the body. Null: decide from the body.
 */
export function scopeByMethod(method: string | undefined): (ScopeDecision & { inScope: false }) | null {
  if (method === 'POST') return null;
  return { inScope: false, reason: 'method-not-post', detail: method && KNOWN_METHODS.has(method) ? method : '<other>' };
}

export interface ScopeConfig {
  continuationModel: string | undefined;
  engine: Engine;
  maxContinuationBodyBytes: number;
  bufferStructuredOutput?: boolean;
  /** MAX_BODY_JSON_DEPTH: deeper bodies are never parsed (json-depth.ts). */
  maxJsonDepth?: number;
  /** The request's endpoint (src/request/endpoint.ts endpointOf); undefined: a path no endpoint serves. Default chat. */
  endpoint?: Endpoint | undefined;
}

export function decideScope(raw: Buffer, cfg: ScopeConfig): ScopeDecision {
  const endpoint = 'endpoint' in cfg ? cfg.endpoint : 'chat';
  // Before reading the body: a path we build no continuation for is not ours, whatever it carries.
  if (endpoint === undefined || endpoint === 'responses') return skip('endpoint-not-covered', endpoint ?? 'other-path');
  // Before parsing: the parsed payload is held for the whole stream and re-sent in leg 2, so large (typically
  // image) bodies are not worth it, and parsing tens of MB would block every other stream of this process.
  // The reference checks the size last; only the logged reason differs.
  if (raw.length > cfg.maxContinuationBodyBytes) return skip('body-too-large', `${raw.length} bytes`);
  // Recursive code (JSON.stringify of leg 2's body, zod, the walkers of the messages) must never see a
  // document deeper than this; JSON.parse itself would accept it.
  const maxDepth = cfg.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
  if (exceedsJsonDepth(raw, maxDepth)) return skip('json-too-deep', `deeper than ${maxDepth}`);
  // Invalid JSON (or invalid UTF-8, or a BOM, which Python's json.loads also rejects): the engine answers
  // the client's mistake, never us.
  let payload: JsonObject;
  try {
    payload = JSON.parse(decoder.decode(raw));
  } catch (e) {
    // Never the parser's message: V8 quotes the offending input, i.e. the client's prompt text.
    return skip('not-json', e instanceof SyntaxError ? 'invalid JSON or UTF-8' : 'unparseable body');
  }
  if (endpoint === 'completions') return decideCompletions(payload, cfg, raw.length);
  return decideChat(payload, cfg, raw.length);
}

/** The common rules (the reference's order), then the completions schema and its exclusions. */
function decideCompletions(payload: JsonObject, cfg: ScopeConfig, bodyBytes: number): ScopeDecision {
  if (!isObject(payload)) return skip('not-completions-request', 'not an object');
  if (payload.stream !== true) return skip('not-streaming');
  if (!cfg.continuationModel || cfg.continuationModel.trim() === '') return skip('continuation-model-unset');
  const c = completionsScope(payload);
  if (!c.ok) return skip(c.reason, c.detail);
  return { inScope: true, endpoint: 'completions', payload: c.payload, multimodal: false, bodyBytes, structured: false };
}

function decideChat(payload: JsonObject, cfg: ScopeConfig, bodyBytes: number): ScopeDecision {
  const shape = ChatRequestShape.safeParse(payload);
  // The issue's code and path only (keys of the schema above, and indexes): its message may quote the input.
  if (!shape.success) return skip('not-chat-request', issueDetail(shape.error.issues[0]));

  // The reference gateway's order from here on (modelsphere/continuation_gateway server.py should_intervene),
  // then the vLLM multimodal rule.
  // `stream` must be the boolean true: the reference tests truthiness, but a "false" string that an
  // engine coerces would give a non-streamed answer to a gateway expecting SSE.
  if (payload.stream !== true) return skip('not-streaming');
  // The client's own continuation is not stacked on: its prefix format is unknown, and the usage formula
  // assumes exactly two legs.
  if (payload.continue_final_message) return skip('client-continue-final-message');
  if (!cfg.continuationModel || cfg.continuationModel.trim() === '') return skip('continuation-model-unset');
  // Only choice 0 is tracked and continued; n > 1 streams interleave choices we could not stitch.
  if (payload.n != null && payload.n !== 1) return skip('multiple-choices', `n=${smallInt(payload.n)}`);
  const rfType = isObject(payload.response_format) ? payload.response_format.type : undefined;
  const structuredBy =
    typeof rfType === 'string' && STRUCTURED_FORMATS.has(rfType)
      ? `response_format.type=${rfType}`
      : CONSTRAINT_FIELDS.find((f) => payload[f] != null);
  // BUFFER_STRUCTURED_OUTPUT: the document is held until it is complete, so a failure is re-run whole
  // instead of continued; without it, structured output is not ours to touch.
  if (structuredBy && !cfg.bufferStructuredOutput) return skip('structured-output', structuredBy);
  const multimodal = hasMultimodalContent(payload);
  // Listed as out of scope in the reference README for CONTINUATION_ENGINE=vllm (its code for this rule
  // was not available to us; the README gives no reason beyond vLLM rendering the continued message
  // through each model's own template).
  if (cfg.engine === 'vllm' && multimodal) return skip('vllm-multimodal');

  // Validated above: an object with a non-empty messages array.
  return {
    inScope: true,
    endpoint: 'chat',
    payload: payload as ChatRequest,
    multimodal,
    bodyBytes,
    structured: structuredBy !== undefined,
  };
}

function issueDetail(issue: z.core.$ZodIssue | undefined): string {
  if (!issue) return 'invalid';
  const path = issue.path.map((p) => (typeof p === 'number' ? String(p) : typeof p === 'string' ? p : '?')).join('.');
  return `${issue.code}${path ? ` at ${path}` : ''}`;
}
