// Which OpenAI endpoint a request is for, from its path: the one thing that picks the request's schema (its scope
// decision) and how a continuation of it is built. One table, read by the scope decision and by the Envoy
// bootstrap generator (tools/stack/envoy-config.ts), whose front listener routes exactly these paths to the
// ext_proc hop: a path missing here is proxied natively by Envoy and never reaches the sidecar.

/** The endpoints a stream can be in scope on, and the exact path each is served at (the engines' own). */
export const ENDPOINT_PATHS = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
  responses: '/v1/responses',
} as const;

export type Endpoint = keyof typeof ENDPOINT_PATHS;

const BY_PATH: ReadonlyMap<string, Endpoint> = new Map(
  (Object.entries(ENDPOINT_PATHS) as [Endpoint, string][]).map(([endpoint, path]) => [path, endpoint]),
);

/**
 * The endpoint of a request path (`:path`, query string ignored as Envoy's `path` match ignores it), or undefined for
 * any other path. Exact and case-sensitive, as the engines route (FastAPI) and as Envoy's `path` match compares.
 */
export function endpointOf(path: string | undefined): Endpoint | undefined {
  if (path === undefined) return undefined;
  const q = path.indexOf('?');
  return BY_PATH.get(q < 0 ? path : path.slice(0, q));
}
