// Which state the interrupted answer was in, the first thing the continuation decides on (reference
// reconstruct.py classify_case).

export type CaseKind = 'thinking-partial' | 'content-done' | 'tool-call-seen' | 'no-recoverable-content';

/**
 * Same order as the reference's classify_case (strongest evidence first): a tool call seen wins even when text
 * was seen too. The reference calls the last case "empty"; we name it after the skip reason it leads to.
 */
export function classifyCase(toolCallsSeen: boolean, reasoning: string, content: string): CaseKind {
  if (toolCallsSeen) return 'tool-call-seen';
  if (content) return 'content-done';
  if (reasoning) return 'thinking-partial';
  return 'no-recoverable-content';
}
