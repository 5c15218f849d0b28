// The zod parsers of environment variable values that src/config/env.ts and src/config/otel-env.ts share:
// each reports a bad value in words that name what was expected.
import { z } from 'zod';

export const bool = (def: boolean) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === '') return def;
      const s = v.trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(s)) return true;
      if (['0', 'false', 'no', 'off'].includes(s)) return false;
      ctx.addIssue({ code: 'custom', message: `expected true or false, got ${JSON.stringify(v)}` });
      return z.NEVER;
    });

export const num = (def: number, opts: { min?: number; max?: number; int?: boolean; positive?: boolean } = {}) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === '') return def;
      const n = Number(v);
      const bad =
        !Number.isFinite(n) ||
        (opts.int && !Number.isInteger(n)) ||
        (opts.positive && n <= 0) ||
        (opts.min !== undefined && n < opts.min) ||
        (opts.max !== undefined && n > opts.max);
      if (bad) {
        const what = opts.positive ? 'a positive' : opts.min !== undefined ? `a >= ${opts.min}` : 'a';
        const upTo = opts.max !== undefined ? ` <= ${opts.max}` : '';
        ctx.addIssue({ code: 'custom', message: `expected ${what} ${opts.int ? 'integer' : 'number'}${upTo}, got ${JSON.stringify(v)}` });
        return z.NEVER;
      }
      return n;
    });

/**
 * The longest timer Node can arm, in whole seconds: setTimeout() with more than 2^31-1 ms fires after 1 ms
 * (TimeoutOverflowWarning), so a huge "never" value would turn into an instant timeout.
 */
export const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

export const httpUrl = z
  .string()
  .trim()
  .transform((v, ctx) => {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      ctx.addIssue({ code: 'custom', message: `expected an http(s) URL, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `expected an http(s) URL, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    return v.replace(/\/+$/, '');
  });

/** An optional http(s) URL: unset or blank = undefined; a bad value is reported like DOWNSTREAM_URL's. */
export const optionalHttpUrl = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v.trim() === '') return undefined;
    const r = httpUrl.safeParse(v);
    if (r.success) return r.data;
    for (const issue of r.error.issues) ctx.addIssue({ code: 'custom', message: issue.message });
    return z.NEVER;
  });

export const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
