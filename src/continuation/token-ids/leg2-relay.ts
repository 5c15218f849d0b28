// Leg 2 by ids on the leg loop: each frame the engine streams (leg2-frames.ts) is split into reasoning and
// content (raw-split.ts) and relayed as chat chunks in leg 1's shape (client-chunks.ts); at the finish, the
// finish chunk, the exact usage when the client asked for it, and [DONE]. Silence is waited out as on the text
// path (src/continuation/leg2-hooks.ts). It writes nothing itself: what the client gets goes back to the
// request's deliver().
import type { JsonObject } from '../../openai/chat';
import { DONE_EVENT } from '../../recovery/interruption';
import { type ObservedEvent, StreamTracker } from '../../sse/tracker';
import type { LegFailure, LegOutcome, Outgoing } from '../../stream/legs/leg-loop';
import { readLeg } from '../../stream/legs/leg-loop';
import type { LegReader } from '../../upstream/leg-reader';
import { Leg2Hooks, type Leg2HooksHost } from '../leg2-hooks';
import { type ChunkShape, finishChunk, sseData, textChunk, usageChunk } from './client-chunks';
import { type FrameRead, type Leg2Frame, readLlamaCompletionFrame, readVllmCompletionChunk } from './leg2-frames';
import type { RawSplitter, SplitPiece } from './raw-split';
import { idsUsage } from './usage';

export interface IdsLeg2Host extends Leg2HooksHost {
  readonly engine: 'vllm' | 'llamacpp';
  readonly shape: ChunkShape;
  readonly splitter: RawSplitter;
  readonly clientWantsUsage: boolean;
  readonly promptTokens: number;
  readonly deliveredTokens: number;
  /** Of those, reasoning (null: the engine reports no reasoning count for this stream). */
  readonly deliveredReasoning: number | null;
  readonly legs: number;
  onFirstToken(): void;
}

/** What leg 2 streamed, for a further leg by ids and the record. */
export interface IdsLeg2Progress {
  /** Every id leg 2 streamed, in order; `complete` false when a frame's ids were missing (a gap). */
  readonly ids: number[];
  complete: boolean;
  /** Of those, the ones that came while the split was in the reasoning (the marker's own included). */
  reasoning: number;
}

export function relayIdsLeg2(h: IdsLeg2Host, reader: LegReader, progress: IdsLeg2Progress): Promise<LegOutcome> {
  return readLeg(reader, new IdsLeg2Relay(h, progress));
}

/** The chat chunk as the client gets it, with the event the request's tracker applies. */
function outgoing(json: JsonObject): Outgoing {
  const bytes = sseData(json);
  return { bytes, events: [StreamTracker.read({ raw: bytes, data: bytes.toString('utf8', 6, bytes.length - 2) })] };
}

/** Leg 2 by ids's LegHooks: the engine's frames relayed as chat chunks, its ids kept for a further leg. */
class IdsLeg2Relay extends Leg2Hooks<IdsLeg2Host> {
  private finish: string | null = null;
  private generated = 0;
  private firstToken = false;
  private readonly readFrame: (json: JsonObject) => FrameRead;

  constructor(
    h: IdsLeg2Host,
    private readonly progress: IdsLeg2Progress,
  ) {
    super(h);
    this.readFrame = h.engine === 'vllm' ? readVllmCompletionChunk : readLlamaCompletionFrame;
  }

  /** The engine's finish was relayed; vLLM's usage chunk and [DONE] may follow, llama-server's frame was the last. */
  finished(): boolean {
    return this.finish !== null;
  }

  atFinish(): Outgoing[] {
    return [];
  }

  onEvent(event: ObservedEvent): readonly Outgoing[] | LegFailure {
    if (event.kind !== 'chunk' || this.finish !== null) return [];
    const r = this.readFrame(event.json);
    if ('ignore' in r) return [];
    if ('error' in r) return { type: 'failed', failure: 'error-event' };
    return this.relayFrame(r.frame);
  }

  private relayFrame(f: Leg2Frame): readonly Outgoing[] {
    if (this.h.splitter.current === 'reasoning') this.progress.reasoning += f.ids?.length ?? 0;
    if (f.ids) for (const id of f.ids) this.progress.ids.push(id);
    else if (f.text) this.progress.complete = false;
    this.generated = f.generated ?? this.progress.ids.length;
    if (!this.firstToken && (f.text || f.finishReason)) {
      this.firstToken = true;
      this.h.onFirstToken();
    }
    const out = this.pieces(this.h.splitter.push(f.text));
    if (f.finishReason === null) return out;
    this.finish = f.finishReason;
    out.push(...this.pieces(this.h.splitter.end()), outgoing(finishChunk(this.h.shape, f.finishReason, f.stop)));
    if (this.h.clientWantsUsage) out.push(outgoing(usageChunk(this.h.shape, this.usage())));
    out.push({ bytes: DONE_EVENT, events: [StreamTracker.read({ raw: DONE_EVENT, data: '[DONE]' })] });
    return out;
  }

  private pieces(p: SplitPiece): Outgoing[] {
    const out: Outgoing[] = [];
    if (p.reasoning) out.push(outgoing(textChunk(this.h.shape, 'reasoning', p.reasoning)));
    if (p.content) out.push(outgoing(textChunk(this.h.shape, 'content', p.content)));
    return out;
  }

  private usage(): JsonObject {
    const h = this.h;
    const reasoningTokens = h.deliveredReasoning === null ? undefined : h.deliveredReasoning + this.progress.reasoning;
    return idsUsage({
      engine: h.engine,
      promptTokens: h.promptTokens,
      deliveredTokens: h.deliveredTokens,
      leg2Tokens: this.generated,
      legs: h.legs,
      reasoningTokens,
    });
  }
}
