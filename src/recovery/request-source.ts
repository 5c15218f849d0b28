// Who a request came from, as the recovery brake tells failures apart (admission-policy.ts brakeEvidence):
// the client address Envoy forwards (the first x-forwarded-for entry), else the request's shape (its body).
// Only a digest is kept, never the address or the body: it is compared, not logged.
import { createHash } from 'node:crypto';

export function requestSource(headers: Readonly<Record<string, string | undefined>>, body: Buffer): string {
  const client = headers['x-forwarded-for']?.split(',')[0]?.trim();
  const h = createHash('sha256');
  if (client) h.update(`client\n${client}`);
  else h.update('shape\n').update(body);
  return h.digest('base64url').slice(0, 22);
}
