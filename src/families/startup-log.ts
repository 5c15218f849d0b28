// What the sidecar says at start about the continuations it will make: where leg 2's format comes from (the
// family CONTINUATION_MODEL selects, CHAT_TEMPLATE's template path, or the generic guess, as
// src/recovery/leg2-design.ts chooseSource will choose with the template at hand) and what verifies each one on
// this engine (our render of the template, the engine's own check, both, or nothing), or a warning naming the
// known families when the value is unset or unknown and no template text is known.

import type { Logger } from '../obs/logger';
import { chooseSource } from '../recovery/leg2-design';
import { isTemplateAuto } from '../templates/provider';
import type { ServedTemplate } from '../templates/served';
import { knownFamilies, selectFamily } from './select';
import type { Engine } from './types';

export interface FamilyLogConfig {
  readonly continuationModel: string | undefined;
  readonly engine: Engine;
  readonly chatTemplate?: string;
  /** CONTINUATION_UNVERIFIED: what the generic guess gets (default allow). */
  readonly continuationUnverified?: 'allow' | 'refuse';
}

/** What checks each leg 2 before it is sent, in the log's words: `check` a fixed value, `how` a sentence. */
export function verification(cfg: FamilyLogConfig): { check: string; how: string } | undefined {
  if (cfg.chatTemplate === undefined) return undefined;
  const only = 'the only check: a continuation it does not confirm in time (TOKENIZE_TIMEOUT_MS) ends explicitly (continuation-unverified)';
  if (isTemplateAuto(cfg.chatTemplate)) {
    if (cfg.engine === 'vllm')
      return {
        check: 'engine',
        how: `CHAT_TEMPLATE=auto on vLLM: no template is read (vLLM serves none to read); each leg 2 is checked by vLLM's chat /tokenize through the template it serves, ${only}`,
      };
    if (cfg.engine === 'llamacpp')
      return {
        check: 'engine',
        how: `CHAT_TEMPLATE=auto on llama.cpp: the template is read from llama-server's GET /props once it answers (TEMPLATE_LOADED), continuations then designed from it as from a file; each leg 2 is checked by its /apply-template, ${only}`,
      };
    return undefined; // SGLang: refused at start (src/config/env.ts)
  }
  if (cfg.engine === 'sglang')
    return { check: 'template', how: 'each leg 2 is rendered from CHAT_TEMPLATE and verified against it before it is sent' };
  if (cfg.engine === 'vllm')
    return {
      check: 'template+engine',
      how: "each leg 2 is rendered from CHAT_TEMPLATE and verified against it, then checked by vLLM's chat /tokenize (the engine wins; unanswered in time, our render's verification stands)",
    };
  return {
    check: 'engine',
    how: `each leg 2 is designed from CHAT_TEMPLATE and checked by llama-server's /apply-template (our render does not verify llama.cpp's prompts), ${only}`,
  };
}

export function logFamily(log: Logger, cfg: FamilyLogConfig, served?: ServedTemplate): void {
  const model = cfg.continuationModel?.trim() ?? '';
  if (model === '') {
    log.warn(
      { decision: 'FAMILY_UNSET', known_families: knownFamilies() },
      'CONTINUATION_MODEL is unset: no request is in scope (every stream is proxied as if the gateway were absent)',
    );
    return;
  }
  const v = verification(cfg);
  if (!v)
    log.warn(
      { decision: 'CONTINUATION_UNCHECKED', engine: cfg.engine },
      'continuations follow the family table without a check: set CHAT_TEMPLATE to verify each one against the served template (and, on vLLM and llama.cpp, the engine)',
    );
  const checked = v ? { check: v.check } : { check: 'none' };
  const how = v ? `; ${v.how}` : '';
  if (model.toLowerCase() === 'auto') {
    log.info(
      { decision: 'FAMILY_AUTO', engine: cfg.engine, ...checked },
      `CONTINUATION_MODEL=auto: the family is read from the engine (streams pass through until then)${how}`,
    );
    return;
  }
  logSource(log, cfg, served, { checked, how });
}

/** What an unknown name's continuations get, by CONTINUATION_UNVERIFIED. */
const GUESS = {
  allow:
    'continuations use the generic <think> format, which no template test backs, each labelled unverified (CONTINUATION_UNVERIFIED=allow; set CONTINUATION_UNVERIFIED=refuse to end a stream that has shown reasoning explicitly instead, or CHAT_TEMPLATE to verify each one)',
  refuse:
    'a stream that has shown reasoning ends explicitly (continuation-unverified, CONTINUATION_UNVERIFIED=refuse); a content-only stream is continued with the generic format, labelled unverified; set CHAT_TEMPLATE to verify each one',
} as const;

/** The source chooseSource takes for this name and template, and what it means on this engine. */
function logSource(
  log: Logger,
  cfg: FamilyLogConfig,
  served: ServedTemplate | undefined,
  v: { checked: { check: string }; how: string },
): void {
  const { family, known } = selectFamily(cfg.continuationModel);
  const { source } = chooseSource({ continuationModel: cfg.continuationModel ?? '', served });
  const rule = family.engines[cfg.engine];
  const fields = { family: family.name, engine: cfg.engine, continues: rule.phases, how: rule.note, ...v.checked };
  if (source === 'template') {
    const why =
      known && family.name !== 'generic'
        ? `${family.name}'s entry was not proven against this template`
        : 'no family entry names this model';
    log.info(
      { decision: 'FAMILY_TEMPLATE_PATH', engine: cfg.engine, origin: served?.origin, sha256: served?.sha256, ...v.checked },
      `${why}: continuations are designed from CHAT_TEMPLATE's template${v.how}`,
    );
    return;
  }
  if (source === 'generic' && !known) {
    const policy = cfg.continuationUnverified ?? 'allow';
    log.warn(
      { decision: 'FAMILY_UNKNOWN', ...fields, continuation_unverified: policy, known_families: knownFamilies() },
      `CONTINUATION_MODEL names no known model family and no template text is known: ${GUESS[policy]}${v.how}`,
    );
    return;
  }
  if (rule.phases.length === 0) {
    log.warn(
      { decision: 'FAMILY_UNSUPPORTED', ...fields },
      `this family cannot be continued exactly on this engine: interrupted streams end explicitly${v.how}`,
    );
    return;
  }
  log.info({ decision: 'FAMILY', ...fields }, `continuation format${v.how}`);
}
