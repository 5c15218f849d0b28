// Stable error codes (src/errors.ts ERROR_CODES) and log decisions (src/obs/decisions.ts DECISIONS): each one
// unique, and every literal in src/ one of them, so a new class or record cannot bring a code of its own, or a
// colliding one (LegOpenError's computed `aborted` code was LegAbortedError's).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ERROR_CODES, GatewayError } from '../../src/errors';
import { DECISIONS } from '../../src/obs/decisions';
import { LegOpenError } from '../../src/upstream/client';
import { LegAbortedError } from '../../src/upstream/leg-body';

const SRC = path.resolve(__dirname, '..', '..', '..', 'src');
const sources = (dir = SRC): string[] =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });

describe('error codes', () => {
  it('are unique', () => {
    const codes = Object.values(ERROR_CODES);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('LegOpenError has one code per kind, none of them another class’s', () => {
    const kinds = ['connect', 'headers-timeout', 'aborted', 'reset'] as const;
    const codes = kinds.map((k) => new LegOpenError(k).code);
    expect(new Set(codes).size).toBe(kinds.length);
    expect(codes).not.toContain(new LegAbortedError().code);
    for (const c of codes) expect(Object.values(ERROR_CODES)).toContain(c);
  });

  it('every class of src/ that extends GatewayError takes its code from ERROR_CODES', () => {
    const offenders: string[] = [];
    for (const f of sources()) {
      const text = fs.readFileSync(f, 'utf8');
      if (/GW_ERR_[A-Z_]+/.test(text) && !f.endsWith(`${path.sep}errors.ts`)) {
        const literals = text.match(/['`]GW_ERR_[A-Z_]+['`]/g) ?? [];
        if (literals.length) offenders.push(`${path.relative(SRC, f)}: ${literals.join(', ')}`);
      }
    }
    expect(offenders).toEqual([]);
    expect(new LegAbortedError()).toBeInstanceOf(GatewayError);
  });
});

describe('log decisions', () => {
  it('are unique, and every decision written in src/ is one of them', () => {
    expect(new Set(DECISIONS).size).toBe(DECISIONS.length);
    const known = new Set<string>(DECISIONS);
    const unknown: string[] = [];
    for (const f of sources()) {
      const text = fs.readFileSync(f, 'utf8');
      for (const m of text.matchAll(/decision: '([A-Z0-9_]+)'|logTransition\('([A-Z0-9_]+)'/g)) {
        const d = m[1] ?? m[2];
        if (!known.has(d)) unknown.push(`${path.relative(SRC, f)}: ${d}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('the README names every one', () => {
    const readme = fs.readFileSync(path.resolve(SRC, '..', 'README.md'), 'utf8');
    expect(DECISIONS.filter((d) => !readme.includes(`\`${d}\``))).toEqual([]);
  });
});
