// Non-streaming answer: the same plan as a stream, delivered as one chat.completion JSON. Faults map to
// their closest whole-response equivalent (there are no token boundaries on the wire to hit).
import { completionBody, errorBody, type FullAnswer } from './dialect';
import type { Exchange } from './exchange';
import { reasoningTokenCount } from './plan';
import type { StreamSettings } from './stream';

function summarize(s: StreamSettings, upTo: number, finish: string): FullAnswer {
  const deltas = s.plan.deltas.slice(0, upTo);
  const text = (kind: 'reasoning' | 'content' | 'tool-args') =>
    deltas.map((d) => (d.kind === kind && 'text' in d ? d.text : d.kind === 'split' && kind !== 'tool-args' ? d[kind] : '')).join('');
  const start = deltas.find((d) => d.kind === 'tool-start');
  return {
    reasoning: text('reasoning'),
    content: text('content'),
    toolCall: start && start.kind === 'tool-start' ? { id: start.id, name: start.name, arguments: text('tool-args') } : undefined,
    finish,
    usage: {
      prompt: s.plan.promptTokens,
      completion: deltas.length,
      reasoning: reasoningTokenCount(deltas),
    },
  };
}

export function sendCompletion(ex: Exchange, s: StreamSettings): void {
  const f = s.fault;
  const n = s.plan.deltas.length;
  const whole = () => completionBody(s.ctx, summarize(s, n, s.plan.finish));
  // Generation time is simulated so that timeouts in front of the engine behave as with a stream.
  let delay = (f?.kind === 'slow' ? (f.ms ?? 0) : 0) + s.intervalMs * Math.ceil(n / s.burst);
  if (f?.kind === 'stall') {
    if (f.ms === undefined) return; // never answers
    delay += f.ms; // a stall that resumes is just a slower answer
  }
  ex.later(delay, () => {
    switch (f?.kind) {
      case 'crash':
        return ex.killSocket('reset');
      case 'fin':
        return ex.killSocket('fin');
      case 'error':
        return ex.sendJson(500, errorBody('fake-engine injected error', 'InternalServerError', 500));
      case 'eof':
      case 'malformed': {
        const text = JSON.stringify(whole());
        ex.res.writeHead(200, { 'content-type': 'application/json' });
        return ex.end(text.slice(0, Math.floor(text.length / 2)));
      }
      case 'abort': {
        const at = Math.min(f.at, n);
        ex.record.tokensSent = at;
        return ex.sendJson(200, completionBody(s.ctx, summarize(s, at, 'abort')));
      }
      default:
        ex.record.tokensSent = n;
        return ex.sendJson(200, whole());
    }
  });
}
