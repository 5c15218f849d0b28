// An engine's keep-alive comments, coalesced (issue 39). A comment tells a client's idle timer that the stream
// is alive; one every few seconds serves that, a thousand a second only costs memory and CPU on every hop (the
// sidecar's relay, Envoy's buffers, a slow client's socket). So a leg relays at most one comment per
// KEEP_ALIVE_INTERVAL_MS and drops the rest (counted); the SSE parser already returns at most one comment per
// chunk it reads (src/sse/parser.ts boundedNonEvents). Pure.

/** At most one engine comment per this interval reaches the client: well under any idle timeout a client sets. */
export const KEEP_ALIVE_INTERVAL_MS = 5000;

/** Whether a comment arriving at `now` is relayed, given when the leg last relayed one (null: never). */
export function keepAliveDue(lastRelayedAt: number | null, now: number, intervalMs = KEEP_ALIVE_INTERVAL_MS): boolean {
  return lastRelayedAt === null || now - lastRelayedAt >= intervalMs;
}
