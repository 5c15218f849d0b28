// Decides from the raw body whether a POST /v1/responses request gets continuation coverage, and builds the
// chat request its continuation legs start from. Out of scope means forwarded untouched, exactly as without the
// gateway; when in doubt, out of scope (src/request/scope.ts's rule). In scope but not continuable (the input
// is more than plain messages, or a previous_response_id names history the gateway never saw): a failure
// before the first delta is still re-run whole, a failure after it ends with response.failed.
import type { Engine } from '../../families/types';
import { isObject, type JsonObject } from '../../openai/chat';
import { FunctionTool, type ResponsesRequest, ResponsesRequestShape } from '../../openai/responses';
import { exceedsJsonDepth } from '../../request/json-depth';
import { DEFAULT_MAX_JSON_DEPTH } from '../../request/scope';
import { type ResponsesDialect, SGLANG_RESPONSES, VLLM_RESPONSES } from './dialect';
import { sglangChatForm } from './sglang-scope';
import { type ChatForm, toChatRequest } from './to-chat';

/** Why a Responses request is passed through (metric label `passthrough:<reason>`). */
export type ResponsesSkipReason =
  | 'not-json'
  | 'json-too-deep'
  | 'body-too-large'
  | 'not-responses-request'
  | 'not-streaming'
  | 'continuation-model-unset'
  | 'structured-output'
  | 'responses-background'
  | 'responses-server-tools'
  | 'responses-engine-unsupported';

export type ResponsesScope =
  | {
      inScope: true;
      request: ResponsesRequest;
      /** The request as a chat request (continuation legs), or why none can be built. */
      chat: ChatForm;
      /** The engine's variant of the events, which the gateway's own follow. */
      dialect: ResponsesDialect;
      bodyBytes: number;
    }
  | { inScope: false; reason: ResponsesSkipReason; detail?: string };

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const skip = (reason: ResponsesSkipReason, detail?: string): ResponsesScope => ({ inScope: false, reason, detail });
const STRUCTURED = new Set(['json_object', 'json_schema']);

export function decideResponsesScope(
  raw: Buffer,
  cfg: { continuationModel: string | undefined; engine: Engine; maxContinuationBodyBytes: number; maxJsonDepth?: number },
): ResponsesScope {
  // vLLM 0.33.0's event stream (events.ts) and SGLang 0.5.23's variant (sglang-events.ts; what of it cannot be
  // continued: sglang-scope.ts) are written back; llama.cpp's has not been read: passed through.
  if (cfg.engine !== 'vllm' && cfg.engine !== 'sglang') return skip('responses-engine-unsupported', cfg.engine);
  if (raw.length > cfg.maxContinuationBodyBytes) return skip('body-too-large', `${raw.length} bytes`);
  if (exceedsJsonDepth(raw, cfg.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH)) return skip('json-too-deep');
  let payload: JsonObject;
  try {
    payload = JSON.parse(decoder.decode(raw));
  } catch {
    return skip('not-json', 'invalid JSON or UTF-8'); // never the parser's message: it quotes the input
  }
  if (!ResponsesRequestShape.safeParse(payload).success) return skip('not-responses-request');
  const req = payload as ResponsesRequest;
  if (req.stream !== true) return skip('not-streaming');
  if (!cfg.continuationModel || cfg.continuationModel.trim() === '') return skip('continuation-model-unset');
  // A background response is stored and streamed again by GET /v1/responses/{id}: not one stream to continue.
  if (req.background === true) return skip('responses-background');
  const format = isObject(req.text) && isObject(req.text.format) ? req.text.format.type : undefined;
  if (typeof format === 'string' && STRUCTURED.has(format)) return skip('structured-output', `text.format.type=${format}`);
  // Built-in tools (web search, MCP, code interpreter) run inside the engine, between the model's turns.
  const tools = Array.isArray(req.tools) ? req.tools : [];
  const serverTool = tools.find((t) => !FunctionTool.safeParse(t).success);
  if (serverTool !== undefined) return skip('responses-server-tools', toolType(serverTool));
  if (cfg.engine === 'vllm')
    return { inScope: true, request: req, chat: toChatRequest(req), dialect: VLLM_RESPONSES, bodyBytes: raw.length };
  const chat = sglangChatForm(req, toChatRequest(req));
  return { inScope: true, request: req, chat, dialect: SGLANG_RESPONSES, bodyBytes: raw.length };
}

function toolType(t: unknown): string {
  const type = isObject(t) ? t.type : undefined;
  return typeof type === 'string' && /^[a-z_]{1,40}$/.test(type) ? type : '<other>';
}
