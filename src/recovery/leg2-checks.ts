// What the checks made after the design say of leg 2, before it is sent: the engine's own verdict (vLLM's
// /tokenize, llama.cpp's /apply-template; src/templates/engine-check.ts) and the date. Pure.
import type { EngineVerdict } from '../templates/engine-check';
import { localDay } from '../templates/strftime';
import type { Designed } from './leg2-design';

/**
 * The engine's verdict applied: it wins over our render. It is asked only with CHAT_TEMPLATE set
 * (src/continuation/template/leg2-prepare.ts), where every continuation is to be verified: a leg 2 our render of
 * the template did not verify (llama.cpp, whose prompts only the engine renders; `auto` on vLLM, or on llama.cpp before
 * /props answers: no template here) goes only on the engine's agreement, so an engine that cannot answer in time
 * ends it explicitly rather than letting it go unverified.
 */
export function withEngineVerdict(d: Designed, verdict: EngineVerdict | undefined): Designed {
  if ('unsupported' in d || verdict === undefined) return d;
  const design = d.design;
  if (verdict.kind === 'differs') return { unsupported: verdict.detail, reason: 'continuation-unverified', design, diff: verdict.diff };
  if (verdict.kind === 'unavailable')
    return design.verifiedBy === 'template'
      ? d
      : { unsupported: `engine-check-unavailable:${verdict.detail}`, reason: 'continuation-unverified', design };
  return {
    design: {
      ...design,
      shape: { ...design.shape, message: verdict.message },
      verifiedBy: design.verifiedBy === 'template' ? 'template' : 'engine',
    },
  };
}

/**
 * Only the engine renders leg 2 (no template here, or llama.cpp's): a template that reads the clock, or one we
 * cannot see (the generic guess), would render another day than leg 1's after midnight (the sidecar's local
 * day, which should be the engine's: both processes' TZ). Where we render the template ourselves, leg 2 is
 * already rendered as of now against leg 1's day (verifyLeg2).
 */
export function withDateRule(d: Designed, clock: { leg1At: Date; now: Date }): Designed {
  if ('unsupported' in d) return d;
  const design = d.design;
  if (design.verifiedBy === 'template') return d;
  if (!design.readsClock && design.source !== 'generic') return d;
  if (localDay(clock.leg1At) === localDay(clock.now)) return d;
  return { unsupported: 'date-changed', reason: 'continuation-unverified', design };
}
