// The V8 flags the sidecar runs with, stated once: the image's CMD, `npm run sidecar`, the stack and the bench
// start it with them (test/unit/runtime.test.ts holds the first two to this list), and its cluster workers
// inherit them (cluster.fork passes the primary's execArgv).
//
// --max-semi-space-size=16 (MiB): Node 24's V8 sizes the young generation by the host's memory (a 64 MiB
// semi-space, 128 MiB of new space on a 24 GiB machine; Node 20 and 22: 16 and 32). A relay allocates many
// short-lived objects per chunk, so on Node 24 the young generation grew to its maximum: the sidecar's RSS under
// one 1 GB stream rose 108-204 MB above idle against 53-60 MB on Node 22 (test/e2e/stream-memory.e2e.test.ts,
// docs/memory.md). With this flag Node 24 rises 55 MB, as Node 22 does. It cannot be set from inside the process:
// V8 sizes its heap when the isolate starts (v8.setFlagsFromString then changes nothing).
export const SIDECAR_NODE_FLAGS: readonly string[] = Object.freeze(['--max-semi-space-size=16']);
