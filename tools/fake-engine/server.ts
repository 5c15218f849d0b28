// The fake inference engine: a real node:http server imitating an OpenAI-compatible SGLang or vLLM
// replica, deterministic so that end-to-end tests can compare stitched answers byte for byte.
import http from 'node:http';
import type { Socket } from 'node:net';
import { selectFamily } from '../../src/families/select';
import { answerFor, withoutTrailingAssistant } from './answer';
import { sendCompletion } from './completion';
import { type Dialect, errorBody } from './dialect';
import { Exchange, type SeenRequest } from './exchange';
import { type Fault, type FaultScope, headersExceed, takeFault } from './faults';
import { parseSize, planRequest } from './plan';
import { PrefillLoad } from './prefill';
import { ResponsesRun, responsesAsChat } from './responses';
import { parseBurst, StreamRun } from './stream';
import { planTemplateAnswer, type TemplateModelOptions, templateModel, templatePromptText } from './template-model';
import { planTextCompletion } from './text-completion';
import { tokenCompletion } from './token-completion';
import { contentText, promptTokens, tokenId, tokenize } from './tokens';

export type { Dialect } from './dialect';

/** A /v1/completions body whose prompt is a list of token ids (vLLM's CompletionRequest accepts one). */
function isTokenIdPrompt(body: unknown): boolean {
  const prompt = body && typeof body === 'object' ? (body as { prompt?: unknown }).prompt : undefined;
  return Array.isArray(prompt) && prompt.length > 0 && prompt.every((t) => Number.isInteger(t));
}

export type { SeenRequest } from './exchange';

export interface FakeEngineOptions {
  port?: number;
  host?: string;
  name?: string;
  dialect?: Dialect;
  /** The model family it speaks, as CONTINUATION_MODEL names one (default generic: markers invisible, uncounted). */
  family?: string;
  tokenIntervalMs?: number;
  /** Model id listed by GET /v1/models (chat answers echo the request's model). */
  model?: string;
  /**
   * The weight revision served: sent as the `x-model-revision` response header (unless revisionHeader is
   * false) and as `system_fingerprint` on every chunk, as a replica of a rolling update would.
   */
  revision?: string;
  revisionHeader?: boolean;
  /**
   * The /tokenize dialect (default: the chat dialect). `sglang`: text only ({prompt} or {text}; a body with
   * messages and no prompt is refused, as SGLang's TokenizeRequest does). `vllm`: text or messages (through
   * the pseudo chat template). `llamacpp`: {content} only (anything else: 200 {"tokens": []}, as llama-server),
   * plus POST /apply-template {messages} -> {prompt}.
   */
  tokenizer?: TokenizerDialect;
  /**
   * How `x-fake-fault` steps are counted (tools/fake-engine/faults.ts): per header value (default, the tests), or
   * per header value and client request (`request`: the demo, where the same curl line crashes every time).
   */
  faultScope?: FaultScope;
  /**
   * The slow-prefill mode (tools/fake-engine/prefill.ts): a chat request's answer starts this many ms times the
   * prefills in progress (itself included) after it arrives; 0 (default) = at once.
   */
  prefillMsPerConcurrent?: number;
  /** ... plus this many ms for every chat request, whatever the load (a prefill that takes time but does not queue). */
  prefillMs?: number;
  /**
   * Serve this chat template (tools/fake-engine/template-model.ts): requests rendered by the dialect's rule, the
   * answer the template shows the model writing, split by a marker parser or none. Replaces `family`.
   */
  chatTemplate?: TemplateModelOptions;
  /** /tokenize (and /apply-template) answers this many ms late: an engine too slow for TOKENIZE_TIMEOUT_MS. */
  tokenizeDelayMs?: number;
  /**
   * vLLM's return_token_ids for a family's answer too (default: the generic family's only): one id per raw token,
   * markers included, a token the reasoning parser held back on a chunk `delta: {}` of its own (as vLLM sends it:
   * chat_completion/serving.py); the leg by ids (token-completion.ts) then continues the raw answer.
   */
  familyTokenIds?: boolean;
}

export type TokenizerDialect = 'sglang' | 'vllm' | 'llamacpp';

export interface FakeEngine {
  url: string;
  port: number;
  name: string;
  requests: SeenRequest[];
  /**
   * A replica that falls over and comes back: every stream it serves is reset now, and chat requests get
   * 503 (as an engine that is restarting or overloaded) for `ms`.
   */
  failFor(ms: number): void;
  /** Chat requests waiting for their first token in the slow-prefill mode (prefillMsPerConcurrent). */
  readonly prefillsInProgress: number;
  /** FakeEngineOptions.tokenizeDelayMs, changeable while the engine runs. */
  tokenizeDelayMs: number;
  close(): Promise<void>;
}

const MAX_MODEL_LEN = 131072;
const CREATED = 1767225600; // fixed: `created` carries no information in tests

function flatHeaders(h: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** x-fake-answer-tokens when it is valid (the chat path answers 400 to an invalid one itself). */
function parseSizeOrUndefined(h: Record<string, string>) {
  const size = parseSize(h['x-fake-answer-tokens']);
  return size === 'bad' ? undefined : size;
}

function parseJson(raw: string): any {
  try {
    return raw === '' ? undefined : JSON.parse(raw);
  } catch {
    return raw;
  }
}

export function startFakeEngine(opts: FakeEngineOptions = {}): Promise<FakeEngine> {
  const name = opts.name ?? 'fake-engine';
  const dialect: Dialect = opts.dialect ?? 'sglang';
  const family: string = opts.family ?? 'generic';
  const model = opts.model ?? 'fake-model';
  const tokenizer: TokenizerDialect = opts.tokenizer ?? dialect;
  const requests: SeenRequest[] = [];
  const live = new Set<Exchange>();
  const sockets = new Set<Socket>();
  const vllmIdsInFlight = new Set<string>();
  let counter = 0;
  let unavailableUntil = 0;
  const prefills = new PrefillLoad(opts.prefillMsPerConcurrent ?? 0, opts.prefillMs ?? 0);
  const tm = opts.chatTemplate ? templateModel(opts.chatTemplate) : undefined;
  let tokenizeDelayMs = opts.tokenizeDelayMs ?? 0;
  /** Answers the tokenizer routes, tokenizeDelayMs late (no answer once the caller has gone). */
  const tokenizerRoute = (ex: Exchange, route: (ex: Exchange) => void) =>
    tokenizeDelayMs > 0 ? ex.later(tokenizeDelayMs, () => route(ex)) : route(ex);

  const bad = (ex: Exchange, message: string) => ex.sendJson(400, errorBody(message, 'BadRequestError', 400));

  /**
   * A chat, (endpoint `completions`) text completion or (`responses`) Responses stream request (tools/fake-engine/
   * responses.ts: the chat answer of the same messages): faults first, then the deterministic answer.
   */
  function chat(ex: Exchange, endpoint: 'chat' | 'completions' | 'responses' = 'chat'): void {
    const { record } = ex;
    const h = record.headers;
    // A completion is a continuation when its prompt carries the start of its own answer (text-completion.ts).
    const textPlan = endpoint === 'completions' ? planTextCompletion(record.body, parseSizeOrUndefined(h)) : undefined;
    if (textPlan?.ok) record.continuation = textPlan.plan.continuation;
    let fault: Fault | undefined;
    try {
      fault = takeFault(h['x-fake-fault'], record.continuation, opts.faultScope === 'request' ? h['x-request-id'] : undefined);
    } catch (e) {
      return bad(ex, (e as Error).message);
    }
    record.fault = fault?.spec;
    if (Date.now() < unavailableUntil)
      return ex.sendJson(503, errorBody('fake-engine: unavailable (failFor)', 'ServiceUnavailableError', 503));
    if (fault?.kind === 'crash-before-headers') return ex.killSocket('reset');
    if (fault?.kind === 'reject-headers') {
      if (headersExceed(h, fault.at)) return ex.killSocket('reset');
      fault = undefined;
    }
    if (fault?.kind === 'hang') return; // socket stays open until the client or close() ends it
    if (fault?.kind === 'plain') {
      ex.res.writeHead(200, { 'content-type': 'text/plain' });
      return ex.end('fake-engine: an answer that is no event stream\n');
    }
    if (fault?.kind === 'empty') {
      ex.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      return ex.end();
    }
    if (fault?.kind === 'status') {
      const code = fault.status ?? 500;
      const retryAfter: Record<string, string> = fault.retryAfter === undefined ? {} : { 'retry-after': String(fault.retryAfter) };
      return ex.sendJson(code, errorBody(`fake-engine injected status ${code}`, 'InjectedError', code), retryAfter);
    }
    const responses = endpoint === 'responses';
    const body = responses ? responsesAsChat(record.body) : record.body;
    if (!body || typeof body !== 'object') return bad(ex, 'fake-engine: body is not JSON');
    if (responses && body.stream !== true) return bad(ex, 'fake-engine: /v1/responses is served streamed only');

    const xrid = h['x-request-id'];
    if (dialect === 'vllm' && xrid !== undefined) {
      // vLLM refuses a request id that is still being served.
      if (vllmIdsInFlight.has(xrid)) return bad(ex, `Request id ${xrid} already running.`);
      vllmIdsInFlight.add(xrid);
      ex.onClose(() => vllmIdsInFlight.delete(xrid));
    }
    const size = parseSize(h['x-fake-answer-tokens']);
    if (size === 'bad') return bad(ex, 'fake-engine: x-fake-answer-tokens must be "R,C"');
    if (textPlan && body.stream !== true) return bad(ex, 'fake-engine: only streamed completions are served');
    const planned = textPlan
      ? textPlan
      : tm
        ? planTemplateAnswer(body, dialect, tm, answerFor(withoutTrailingAssistant(body.messages ?? []), size, false), new Date())
        : planRequest(body, h, dialect, family);
    if (!planned.ok) return bad(ex, planned.message);

    const burst = parseBurst(h['x-fake-burst']);
    if (burst === undefined) return bad(ex, 'fake-engine: x-fake-burst must be an integer >= 1');
    const ms = Number(h['x-fake-token-ms']);
    const settings = {
      ctx: {
        dialect,
        id: `${textPlan ? 'cmpl' : 'chatcmpl'}-${dialect === 'vllm' && xrid !== undefined ? xrid : `${name}-${++counter}`}`,
        // A Responses answer is the chat answer of the same messages.
        endpoint: responses ? ('chat' as const) : endpoint,
        created: CREATED,
        model: typeof body.model === 'string' ? body.model : model,
        revision: opts.revision,
      },
      plan: planned.plan,
      fault,
      intervalMs: h['x-fake-token-ms'] !== undefined && Number.isFinite(ms) && ms >= 0 ? ms : (opts.tokenIntervalMs ?? 2),
      burst,
      includeUsage: body.stream_options?.include_usage === true,
      // vLLM 0.33.0 needs include_usage too (entrypoints/serve/utils/api_utils.py L273-285), SGLang 0.5.23 only the
      // flag (entrypoints/openai/utils.py L250-264).
      continuousUsage:
        body.stream_options?.continuous_usage_stats === true && (dialect === 'sglang' || body.stream_options?.include_usage === true),
      // The generic family's answers are read back from ids (token-completion.ts), a family's only with
      // familyTokenIds (its raw tokens, markers included); otherwise the field is ignored, as by an engine that
      // predates it: the gateway then finds no ids and continues by text.
      promptTokenIds:
        dialect === 'vllm' &&
        body.return_token_ids === true &&
        !tm &&
        (family === 'generic' || (opts.familyTokenIds === true && !textPlan && planned.plan.raw !== undefined))
          ? promptTokens(body.messages).map(tokenId)
          : undefined,
    };
    const respond = () => {
      // vLLM names the response resp_<random_uuid()> (SGLang: its request_id, resp_<uuid>); here it follows from the request, as the chat id does.
      const id = `resp_${settings.ctx.id.slice('chatcmpl-'.length)}`;
      const run = { id, created: CREATED, model: settings.ctx.model, plan: planned.plan, fault, intervalMs: settings.intervalMs };
      new ResponsesRun(ex, { ...run, body: record.body, dialect: dialect === 'sglang' ? 'sglang' : 'vllm' }).start();
    };
    const answer = () =>
      responses ? respond() : body.stream === true ? new StreamRun(ex, settings).start() : sendCompletion(ex, settings);
    const prefill = prefills.begin();
    if (prefill.delayMs <= 0) return answer();
    ex.onClose(prefill.done);
    ex.later(prefill.delayMs, () => {
      prefill.done();
      answer();
    });
  }

  /**
   * A continuation leg by token ids (token-completion.ts): it takes the next step of the `x-fake-fault` script as a
   * chat continuation leg does, so a script reads the same whichever way the gateway continues.
   */
  function tokenIdsLeg(ex: Exchange): void {
    const h = ex.record.headers;
    let fault: Fault | undefined;
    try {
      fault = takeFault(h['x-fake-fault'], true, opts.faultScope === 'request' ? h['x-request-id'] : undefined);
    } catch (e) {
      return bad(ex, (e as Error).message);
    }
    ex.record.fault = fault?.spec;
    tokenCompletion(ex, { created: CREATED, intervalMs: opts.tokenIntervalMs ?? 2, name, fault, family: selectFamily(family).family });
  }

  function tokenizeRoute(ex: Exchange): void {
    const b = ex.record.body;
    if (tokenizer === 'llamacpp') {
      // llama-server reads `content` only and answers an empty list to anything else.
      const tokens = typeof b?.content === 'string' ? tokenize(b.content).map(tokenId) : [];
      return ex.sendJson(200, { tokens });
    }
    if (tokenizer === 'sglang' && typeof b?.prompt !== 'string' && typeof b?.text !== 'string') {
      return ex.sendJson(400, errorBody('fake-engine (sglang /tokenize): field "prompt" required', 'BadRequestError', 400));
    }
    const chatForm = tokenizer === 'vllm' && Array.isArray(b?.messages);
    let toks: string[];
    try {
      toks = chatForm
        ? tm
          ? tokenize(templatePromptText(b, tm, new Date()))
          : promptTokens(b.messages)
        : tokenize(String(b?.prompt ?? b?.text ?? ''));
    } catch (e) {
      return bad(ex, `fake-engine: the template refuses this request: ${(e as Error).message}`);
    }
    const tokens = toks.map(tokenId);
    const out: Record<string, unknown> = { tokens, count: tokens.length };
    if (tokenizer === 'vllm') out.max_model_len = MAX_MODEL_LEN;
    ex.sendJson(200, out);
  }

  /** llama-server's /apply-template: the templated prompt; a final assistant message is an open prefill. */
  function applyTemplateRoute(ex: Exchange): void {
    const messages = ex.record.body?.messages;
    if (!Array.isArray(messages) || messages.length === 0) return bad(ex, 'fake-engine: /apply-template needs messages');
    const last = messages[messages.length - 1];
    const prefill = last?.role === 'assistant' ? contentText(last.content) : '';
    ex.sendJson(200, { prompt: promptTokens(withoutTrailingAssistant(messages)).join('') + prefill });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    res.setHeader('x-fake-replica', name);
    if (opts.revision !== undefined && opts.revisionHeader !== false) res.setHeader('x-model-revision', opts.revision);
    const raw = await readBody(req);
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/health') {
      res.writeHead(200, { 'content-length': 0 });
      res.end();
      return; // not recorded: health checks would grow the log forever in the demo
    }
    const body = parseJson(raw);
    const record: SeenRequest = {
      replica: name,
      method: req.method ?? '',
      path,
      headers: flatHeaders(req.headers),
      body,
      // A completion whose prompt is token ids is a continuation leg by ids; a text completion says so itself
      // (text-completion.ts: its prompt holds an earlier answer's start).
      continuation: !!body && typeof body === 'object' && (body.continue_final_message === true || isTokenIdPrompt(body)),
      startedAt: Date.now(),
      clientAborted: false,
      tokensSent: 0,
    };
    requests.push(record);
    const ex = new Exchange(req, res, record);
    live.add(ex);
    ex.onClose(() => live.delete(ex));

    if (req.method === 'POST' && path === '/v1/chat/completions') return chat(ex);
    if (req.method === 'POST' && path === '/v1/responses') return chat(ex, 'responses');
    // A prompt of token ids is a continuation leg by ids (vLLM); a text prompt is a client's completion.
    if (req.method === 'POST' && path === '/v1/completions' && dialect === 'vllm' && isTokenIdPrompt(body)) return tokenIdsLeg(ex);
    if (req.method === 'POST' && path === '/v1/completions') return chat(ex, 'completions');
    if (req.method === 'POST' && (path === '/tokenize' || (path === '/v1/tokenize' && tokenizer === 'sglang')))
      return tokenizerRoute(ex, tokenizeRoute);
    if (req.method === 'POST' && path === '/apply-template' && tokenizer === 'llamacpp') return tokenizerRoute(ex, applyTemplateRoute);
    if (req.method === 'GET' && path === '/v1/models') {
      return ex.sendJson(200, {
        object: 'list',
        data: [{ id: model, object: 'model', created: CREATED, owned_by: 'fake-engine', root: model, max_model_len: MAX_MODEL_LEN }],
      });
    }
    ex.sendJson(404, errorBody(`fake-engine: no route ${req.method} ${path}`, 'NotFoundError', 404));
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  // A reset socket raises ECONNRESET on our side too; it is expected here, not a crash of the engine.
  server.on('clientError', (_err, s: Socket) => s.destroy());

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      const port = (server.address() as { port: number }).port;
      const host = !opts.host || opts.host === '0.0.0.0' || opts.host === '::' ? '127.0.0.1' : opts.host;
      resolve({
        url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
        port,
        name,
        requests,
        get prefillsInProgress() {
          return prefills.inProgress;
        },
        get tokenizeDelayMs() {
          return tokenizeDelayMs;
        },
        set tokenizeDelayMs(ms: number) {
          tokenizeDelayMs = ms;
        },
        failFor(ms: number) {
          unavailableUntil = Date.now() + ms;
          for (const ex of live)
            if (['/v1/chat/completions', '/v1/completions', '/v1/responses'].includes(ex.record.path)) ex.killSocket('reset');
        },
        close: () =>
          new Promise<void>((done) => {
            for (const ex of live) ex.shutdown();
            server.close(() => done());
            for (const s of sockets) s.destroy();
            server.closeAllConnections();
          }),
      });
    });
  });
}
