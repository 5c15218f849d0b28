// Writes one streamed chat completion as SSE, `burst` token chunks per step on a timer, and injects the
// scripted fault at its token index. Index i means "i token chunks already written"; an index past the end
// fires just before the finish chunk, so `crash@1000` still crashes a short answer. A fault inside a burst
// still fires at its exact index: the burst ends there and the fault opens the next step.
//
// Like a real engine (uvicorn awaits its socket), the next step waits for 'drain' when the socket's write
// buffer is full: a client that stops reading stops the generation instead of growing our buffers.
import { type ChunkContext, finishChunk, idsOnlyChunk, roleChunk, tokenChunk, usageChunk } from './dialect';
import type { Exchange } from './exchange';
import { type Fault, FLOODS } from './faults';
import { type Plan, reasoningTokenCount } from './plan';
import { completionFinishChunk, completionTokenChunk, completionUsageChunk, completionUsageObject } from './text-completion';
import { tokenId } from './tokens';

/** The text of the token a delta carries (a split token: its reasoning and content parts together). */
function deltaText(d: Plan['deltas'][number]): string {
  if (d.kind === 'split') return d.reasoning + d.content;
  if (d.kind === 'tool-start') return d.name;
  return 'text' in d ? d.text : '';
}

export const MALFORMED_EVENT = 'data: {"this is not json\n\n';
export const INJECTED_ERROR = '{"error":{"message":"fake-engine injected error","type":"InternalServerError","code":500}}';

export interface StreamSettings {
  ctx: ChunkContext;
  plan: Plan;
  fault?: Fault;
  intervalMs: number;
  /** Token chunks written per step (x-fake-burst), >= 1. */
  burst: number;
  includeUsage: boolean;
  /** vLLM's stream_options.continuous_usage_stats: every token chunk carries the usage so far. */
  continuousUsage?: boolean;
  /**
   * vLLM's return_token_ids (our reading of vllm 0.33.0 chat_completion/protocol.py and serving.py): the role chunk
   * carries the prompt's ids (top-level `prompt_token_ids`), every token chunk its token's id (`choices[0].token_ids`).
   */
  promptTokenIds?: number[];
}

/** x-fake-burst: an integer >= 1 (default 1); undefined for anything else (the caller answers 400). */
export function parseBurst(header: string | undefined): number | undefined {
  if (header === undefined) return 1;
  return /^\s*\d+\s*$/.test(header) && Number(header) >= 1 ? Number(header) : undefined;
}

export class StreamRun {
  private index = 0;
  private faultDone = false;

  constructor(
    private readonly ex: Exchange,
    private readonly s: StreamSettings,
  ) {}

  start(): void {
    const f = this.s.fault;
    if (f?.kind === 'slow') this.ex.later(f.ms ?? 0, () => this.begin());
    else this.begin();
  }

  private event(obj: unknown): void {
    this.ex.write(`data: ${JSON.stringify(obj)}\n\n`);
  }

  /**
   * The usage so far, as continuous usage stats carry it on every chunk: the prompt, the tokens generated (the
   * silent ones included) and, of those, the reasoning ones (an answer's reasoning tokens come first).
   */
  private runningUsage(generated: number): Record<string, unknown> {
    const { plan } = this.s;
    const reasoning = Math.min(generated, plan.reasoningTokens ?? reasoningTokenCount(plan.deltas));
    const counts = { prompt: plan.promptTokens, completion: generated, reasoning };
    if (this.completions) return completionUsageObject(this.s.ctx, counts);
    return usageChunk(this.s.ctx, counts).usage as Record<string, unknown>;
  }

  private get completions(): boolean {
    return this.s.ctx.endpoint === 'completions';
  }

  private finishChunk(finish: string): Record<string, unknown> {
    return this.completions ? completionFinishChunk(this.s.ctx, finish) : finishChunk(this.s.ctx, finish);
  }

  private begin(): void {
    this.ex.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    // A completion has no role chunk: its first chunk is its first token.
    if (this.completions) return void this.ex.later(this.s.intervalMs, () => this.step());
    const role: Record<string, unknown> = roleChunk(this.s.ctx);
    // vLLM's role chunk carries the running usage too (prompt only), SGLang's none (serving_chat.py L2580-2595).
    if (this.s.continuousUsage && this.s.ctx.dialect === 'vllm') role.usage = this.runningUsage(0);
    // vLLM 0.33.0 sets these fields whether asked or not (serving.py), and dumps with exclude_unset: null when not asked.
    if (this.s.ctx.dialect === 'vllm') role.prompt_token_ids = this.s.promptTokenIds ?? null;
    this.event(role);
    this.ex.later(this.s.intervalMs, () => this.step());
  }

  private step(): void {
    const { plan, fault } = this.s;
    const n = plan.deltas.length;
    for (let written = 0; written < this.s.burst; written++) {
      if (this.ex.closed) return;
      if (fault && !this.faultDone && this.index === Math.min(fault.at, n) && this.atIndexFault(fault)) {
        // A fault opens a step of its own, as with a burst of 1: the chunks before it must have left first
        // (Node corks a response's writes until the next tick; a reset now would discard them).
        if (written > 0) break;
        this.faultDone = true;
        if (!this.applyFault(fault)) return;
      }
      if (this.index >= n) return this.finish();
      const d = plan.deltas[this.index];
      // A family's raw token (markers included) when the plan has them; else the delta's own text.
      const id = () => tokenId(plan.raw?.[this.index] ?? deltaText(d));
      if (d.kind !== 'silent') {
        const chunk = this.completions && d.kind === 'content' ? completionTokenChunk(this.s.ctx, d.text) : tokenChunk(this.s.ctx, d);
        if (!this.completions && this.s.ctx.dialect === 'vllm')
          (chunk.choices as Record<string, unknown>[])[0].token_ids = this.s.promptTokenIds ? [id()] : null;
        if (this.s.continuousUsage) (chunk as Record<string, unknown>).usage = this.runningUsage(this.index + 1);
        this.event(chunk);
      } else if (!this.completions && this.s.promptTokenIds && plan.raw) {
        // A token the parser held back: vLLM sends its id alone when ids are asked, nothing otherwise.
        const chunk = idsOnlyChunk(this.s.ctx, [id()]);
        if (this.s.continuousUsage) (chunk as Record<string, unknown>).usage = this.runningUsage(this.index + 1);
        this.event(chunk);
      }
      this.index++;
      this.ex.record.tokensSent = this.index;
    }
    this.ex.whenDrained(() => this.ex.later(this.s.intervalMs, () => this.step()));
  }

  private atIndexFault(f: Fault): boolean {
    return [
      'crash',
      'fin',
      'eof',
      'stall',
      'error',
      'abort',
      'malformed',
      'done',
      'trickle',
      'finish-number',
      'finish-object',
      'finish-twice',
      'flood',
      'bigline',
    ].includes(f.kind);
  }

  /** Returns true when the stream goes on writing tokens in this same step. */
  private applyFault(f: Fault): boolean {
    switch (f.kind) {
      case 'crash':
        this.ex.killSocket('reset');
        return false;
      case 'fin':
        this.ex.killSocket('fin');
        return false;
      case 'eof':
        this.ex.end();
        return false;
      case 'stall':
        if (f.ms !== undefined) this.ex.later(f.ms, () => this.step());
        return false;
      case 'error':
        this.ex.write(`data: ${INJECTED_ERROR}\n\n`);
        this.ex.end('data: [DONE]\n\n');
        return false;
      case 'abort':
        this.event(this.finishChunk('abort'));
        this.ex.end('data: [DONE]\n\n');
        return false;
      case 'malformed':
        this.ex.write(MALFORMED_EVENT);
        return true;
      case 'done':
        this.ex.end('data: [DONE]\n\n');
        return false;
      case 'finish-number':
      case 'finish-object': {
        const chunk = finishChunk(this.s.ctx, 'stop') as { choices: Record<string, unknown>[] };
        chunk.choices[0].finish_reason = f.kind === 'finish-number' ? 42 : { type: 'stop' };
        this.event(chunk);
        this.ex.end('data: [DONE]\n\n');
        return false;
      }
      case 'finish-twice':
        this.event(finishChunk(this.s.ctx, 'stop'));
        return true;
      case 'flood':
        this.flood(FLOODS[f.flood ?? 'comment'], Date.now() + (f.ms ?? 0));
        return false;
      case 'bigline':
        this.ex.write('data: ');
        this.ex.end('x'.repeat(f.ms ?? 0));
        return false;
      case 'trickle': {
        this.ex.write('data: {"id":"x", ');
        const drip = () => {
          if (this.ex.closed) return;
          this.ex.write(' ');
          this.ex.later(f.ms ?? 200, drip);
        };
        this.ex.later(f.ms ?? 200, drip);
        return false;
      }
      default:
        return true;
    }
  }

  /** Writes `what` until `until`, a step's worth at a time, waiting for the socket to drain; then the answer goes on. */
  private flood(what: string, until: number): void {
    if (this.ex.closed) return;
    if (Date.now() >= until) return void this.step();
    this.ex.write(what.repeat(Math.max(1, Math.floor(16384 / what.length))));
    this.ex.whenDrained(() => setImmediate(() => this.flood(what, until)));
  }

  private finish(): void {
    const { ctx, plan, fault, includeUsage } = this.s;
    const fin = this.finishChunk(plan.finish) as Record<string, unknown>;
    if (!this.completions && ctx.dialect === 'vllm')
      (fin.choices as Record<string, unknown>[])[0].token_ids = this.s.promptTokenIds ? [] : null;
    this.event(fin);
    if (includeUsage) {
      const reasoning = plan.reasoningTokens ?? reasoningTokenCount(plan.deltas);
      const sign = fault?.kind === 'negative-usage' ? -1 : 1;
      const counts = { prompt: sign * plan.promptTokens, completion: sign * plan.deltas.length, reasoning: sign * reasoning };
      this.event(this.completions ? completionUsageChunk(ctx, counts) : usageChunk(ctx, counts));
    }
    this.ex.end(fault?.kind === 'nodone' ? undefined : 'data: [DONE]\n\n');
  }
}
