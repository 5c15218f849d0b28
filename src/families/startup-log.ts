// What the sidecar says at start about the family it will continue: the one CONTINUATION_MODEL selected and
// what its engine can continue, or a warning naming the known families when the value is unset or unknown.
import type { Logger } from '../obs/logger';
import { knownFamilies, selectFamily } from './select';
import type { Engine } from './types';

export function logFamily(
  log: Logger,
  cfg: { continuationModel: string | undefined; engine: Engine; chatTemplate?: string; tokenizeUrl?: string },
): void {
  if (cfg.continuationModel !== undefined && cfg.continuationModel.trim() !== '') logVerification(log, cfg);
  if (cfg.continuationModel === undefined || cfg.continuationModel.trim() === '') {
    log.warn(
      { decision: 'FAMILY_UNSET', known_families: knownFamilies() },
      'CONTINUATION_MODEL is unset: no request is in scope (every stream is proxied as if the gateway were absent)',
    );
    return;
  }
  if (cfg.continuationModel.trim().toLowerCase() === 'auto') {
    log.info(
      { decision: 'FAMILY_AUTO', engine: cfg.engine },
      'CONTINUATION_MODEL=auto: the family is read from the engine (streams pass through until then)',
    );
    return;
  }
  const { family, known } = selectFamily(cfg.continuationModel);
  const rule = family.engines[cfg.engine];
  const fields = { family: family.name, engine: cfg.engine, continues: rule.phases, how: rule.note };
  if (cfg.chatTemplate !== undefined && (!known || family.name === 'generic')) {
    log.info(
      { decision: 'FAMILY_TEMPLATE_PATH', engine: cfg.engine },
      'no family entry names this model: continuations are designed from CHAT_TEMPLATE and verified against it',
    );
    return;
  }
  if (!known) {
    log.warn(
      { decision: 'FAMILY_UNKNOWN', ...fields, known_families: knownFamilies() },
      'CONTINUATION_MODEL names no known model family: continuations use the generic <think> format, which no template test backs',
    );
    return;
  }
  if (rule.phases.length === 0) {
    log.warn(
      { decision: 'FAMILY_UNSUPPORTED', ...fields },
      'this family cannot be continued exactly on this engine: interrupted streams end explicitly',
    );
    return;
  }
  log.info({ decision: 'FAMILY', ...fields }, 'continuation format');
}

/** How continuations will be checked: with the served template, the engine's own rendering, or not at all. */
function logVerification(log: Logger, cfg: { engine: Engine; chatTemplate?: string }): void {
  if (cfg.chatTemplate === undefined)
    log.warn(
      { decision: 'CONTINUATION_UNCHECKED', engine: cfg.engine },
      'continuations follow the family table without a check: set CHAT_TEMPLATE to verify each one against the served template (and, on vLLM and llama.cpp, the engine)',
    );
}
