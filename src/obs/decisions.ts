// Every `decision` a log record can carry: a closed set an operator can grep and alert on (README, "Logs").
// test/unit/error-codes.test.ts holds every literal in src/ to this list, and this list to the README.

export const DECISIONS = [
  // A request's life (src/stream/): its records carry the phase snapshot (request-record.ts).
  'PASSTHROUGH',
  'ATTEMPT',
  'RETRY',
  'PASSTHROUGH_FAILURE',
  'FIRST_DELTA',
  'TRIGGERED',
  'SUCCEEDED',
  'FAILED',
  'SKIPPED',
  'WAITING',
  'MALFORMED_EVENT',
  'HOLD_LIMIT',
  'HELD_TOOL_CALL_RELEASED',
  'HELD_TOOL_CALL_DISCARDED',
  'REVISION_MISMATCH',
  'LEG2_RESTARTED',
  'LEG2_UNEXPECTED_OUTPUT',
  'TOKENIZE_FALLBACK',
  'ENGINE_CHECK_UNAVAILABLE',
  'TOKEN_IDS_FALLBACK',
  // Recovery admission (src/recovery/admission*.ts).
  'RECOVERY_ADMITTED',
  'RECOVERY_REFUSED',
  'REPREFILL_LIMIT',
  'BRAKE_OPEN',
  'BRAKE_CLOSED',
  // At start and in the background: the family, the template, Envoy, the configuration, the drain.
  'FAMILY',
  'FAMILY_AUTO',
  'FAMILY_UNSET',
  'FAMILY_UNKNOWN',
  'FAMILY_UNSUPPORTED',
  'FAMILY_DETECTED',
  'FAMILY_UNDETECTED',
  'FAMILY_TEMPLATE_PATH',
  'CONTINUATION_UNCHECKED',
  'TEMPLATE_LOADED',
  'TEMPLATE_UNUSABLE',
  'TOKENIZER_LOADED',
  'ENVOY_TOO_OLD',
  'ENVOY_VERSION_UNKNOWN',
  'CONFIG_UNKNOWN_VARIABLE',
  'DRAIN',
  'DRAINED',
  'DRAIN_TIMEOUT',
] as const;

export type Decision = (typeof DECISIONS)[number];
