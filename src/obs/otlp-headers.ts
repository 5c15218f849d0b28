// OTEL_EXPORTER_OTLP_HEADERS, as the OpenTelemetry spec defines it (no SDK import: src/config/env.ts reads it
// whether tracing is on or off).

/** OTEL_EXPORTER_OTLP_HEADERS' format: `k1=v1,k2=v2`, values URL-encoded (W3C baggage octets). */
export function parseOtlpHeaders(v: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (v ?? '').split(',')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const key = part.slice(0, i).trim().toLowerCase();
    const raw = part.slice(i + 1).trim();
    if (!key) continue;
    try {
      out[key] = decodeURIComponent(raw);
    } catch {
      out[key] = raw; // not percent-encoded after all: taken as written
    }
  }
  return out;
}
