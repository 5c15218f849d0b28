// Small statistics helpers and the SVG chart (hand-written: one CDF panel of inter-chunk gaps per load level,
// one line per configuration).

/** Linear-interpolated percentile of an ascending array (p in 0..100); NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  if (n === 1) return sorted[0];
  const rank = (p / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(n - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

export function sortedFloat64(values: number[]): Float64Array {
  const a = Float64Array.from(values);
  a.sort();
  return a;
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

export function summarize(sorted: Float64Array): Summary {
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: sorted.length ? sorted[sorted.length - 1] : NaN,
    mean: sorted.length ? sum / sorted.length : NaN,
  };
}

/** ~`points` (x, F(x)) pairs of the empirical CDF, denser in the tail (quantiles 0..99 by 1, then 99..100 by 0.1). */
export function cdfPoints(sorted: Float64Array): Array<[number, number]> {
  if (sorted.length === 0) return [];
  const qs: number[] = [];
  for (let q = 0; q < 99; q += 1) qs.push(q);
  for (let q = 99; q <= 100.0001; q += 0.1) qs.push(Math.min(100, q));
  return qs.map((q) => [round(percentile(sorted, q), 3), round(q / 100, 4)]);
}

export function round(v: number, digits = 2): number {
  if (!Number.isFinite(v)) return v;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

// ---------------------------------------------------------------------------------------------------------------
// SVG
// ---------------------------------------------------------------------------------------------------------------

export interface ChartSeries {
  label: string;
  color: string;
  points: Array<[number, number]>;
}

export interface ChartPanel {
  title: string;
  series: ChartSeries[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function niceStep(range: number, ticks: number): number {
  const raw = range / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

/**
 * CDF panels in a grid. x = gap (ms), clipped at `xMax` (the largest p99.9 of the panel's series, at least
 * expectedMs * 1.5); y = fraction of gaps <= x. A dashed line marks the expected gap (1000 / tokens per s).
 */
export function cdfChart(title: string, subtitle: string, panels: ChartPanel[], expectedMs: number): string {
  const cols = Math.min(2, panels.length);
  const rows = Math.ceil(panels.length / cols);
  const pw = 460;
  const ph = 280;
  const m = { l: 52, r: 16, t: 34, b: 40 };
  const W = cols * pw;
  const H = 56 + rows * ph + 30;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`);
  out.push(`<text x="${W / 2}" y="38" text-anchor="middle" fill="#555">${esc(subtitle)}</text>`);
  panels.forEach((panel, i) => {
    const ox = (i % cols) * pw;
    const oy = 50 + Math.floor(i / cols) * ph;
    const x0 = ox + m.l;
    const y0 = oy + ph - m.b;
    const w = pw - m.l - m.r;
    const h = ph - m.t - m.b;
    let xMax = expectedMs * 1.5;
    for (const s of panel.series) {
      const p999 = s.points.find((p) => p[1] >= 0.999)?.[0] ?? s.points[s.points.length - 1]?.[0] ?? 0;
      xMax = Math.max(xMax, p999 * 1.05);
    }
    const step = niceStep(xMax, 6);
    xMax = Math.ceil(xMax / step) * step;
    const X = (v: number) => x0 + (Math.min(v, xMax) / xMax) * w;
    const Y = (f: number) => y0 - f * h;
    out.push(`<text x="${ox + pw / 2}" y="${oy + 18}" text-anchor="middle" font-weight="bold">${esc(panel.title)}</text>`);
    out.push(`<rect x="${x0}" y="${y0 - h}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
    for (let v = 0; v <= xMax + 1e-9; v += step) {
      out.push(`<line x1="${X(v)}" y1="${y0}" x2="${X(v)}" y2="${y0 - h}" stroke="#eee"/>`);
      out.push(`<text x="${X(v)}" y="${y0 + 14}" text-anchor="middle">${round(v, 1)}</text>`);
    }
    for (const f of [0, 0.25, 0.5, 0.75, 0.9, 0.99, 1]) {
      out.push(`<line x1="${x0}" y1="${Y(f)}" x2="${x0 + w}" y2="${Y(f)}" stroke="#eee"/>`);
      out.push(`<text x="${x0 - 4}" y="${Y(f) + 4}" text-anchor="end">${f}</text>`);
    }
    out.push(`<line x1="${X(expectedMs)}" y1="${y0}" x2="${X(expectedMs)}" y2="${y0 - h}" stroke="#888" stroke-dasharray="4 3"/>`);
    out.push(`<text x="${x0 + w / 2}" y="${y0 + 30}" text-anchor="middle">inter-chunk gap (ms)</text>`);
    panel.series.forEach((s, k) => {
      if (s.points.length === 0) return;
      const d = s.points.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"/>`);
      out.push(`<rect x="${x0 + 8}" y="${y0 - h + 8 + k * 15}" width="10" height="10" fill="${s.color}"/>`);
      out.push(`<text x="${x0 + 22}" y="${y0 - h + 17 + k * 15}">${esc(s.label)}</text>`);
    });
  });
  out.push(
    `<text x="8" y="${H - 8}" fill="#777">empirical CDF, x clipped at the panel's largest p99.9; dashed: expected gap ${round(expectedMs, 1)} ms</text>`,
  );
  out.push('</svg>');
  return out.join('\n');
}
