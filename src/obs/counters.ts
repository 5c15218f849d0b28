// In-process counters, labelled like Prometheus series. Kept dependency-free so the data path only ever
// increments numbers; an exporter (admin port) can render them.

export class Counters {
  private readonly values = new Map<string, number>();

  inc(name: string, labels: Record<string, string> = {}, by = 1): void {
    const key = seriesKey(name, labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }

  get(name: string, labels: Record<string, string> = {}): number {
    return this.values.get(seriesKey(name, labels)) ?? 0;
  }

  scope(decision: string): void {
    this.inc('gateway_requests_total', { scope: decision });
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries(this.values);
  }
}

function seriesKey(name: string, labels: Record<string, string>): string {
  const keys = Object.keys(labels).sort();
  if (!keys.length) return name;
  return `${name}{${keys.map((k) => `${k}="${labels[k]}"`).join(',')}}`;
}
