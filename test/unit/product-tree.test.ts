// Issue 29, item 4: the product tree is the product. The stack (`npm run stack` / `npm run demo`) and the fake
// engine live in tools/ and import the product; no module of src/ may import from tools/, so that the image,
// which ships dist/src alone (Dockerfile, runtime stage), never misses a module at run time.
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '../../..');
const SRC = path.join(ROOT, 'src');
const TOOLS = path.join(ROOT, 'tools');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const inside = (dir: string, p: string) => p === dir || p.startsWith(dir + path.sep);

/**
 * The relative specifiers of `file` (import, export ... from, import(), require(), import type) that resolve
 * into `dir`. Bare specifiers are packages, never our tree.
 */
function importsInto(file: string, dir: string, text = fs.readFileSync(file, 'utf8')): string[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return importedFiles
    .map((f) => f.fileName)
    .filter((spec) => spec.startsWith('.') && inside(dir, path.resolve(path.dirname(file), spec)))
    .map((spec) => `${path.relative(ROOT, file)} -> ${spec}`);
}

describe('the product tree', () => {
  it('no module of src/ imports from tools/', () => {
    const files = sources(SRC);
    expect(files.length).toBeGreaterThan(50);
    expect(files.flatMap((f) => importsInto(f, TOOLS))).toEqual([]);
  });

  it('the stack and the fake engine are in tools/, not in src/', () => {
    expect(fs.existsSync(path.join(TOOLS, 'stack', 'main.ts'))).toBe(true);
    expect(fs.existsSync(path.join(TOOLS, 'fake-engine', 'main.ts'))).toBe(true);
    expect(fs.readdirSync(SRC).filter((d) => d === 'stack' || d === 'fake-engine')).toEqual([]);
  });

  it('finds every form of import that resolves into tools/, and only those', () => {
    const file = path.join(SRC, 'openai', 'synthetic.ts');
    const text = [
      "import { a } from '../../tools/stack/envoy-config';",
      "import type { B } from '../../tools/fake-engine/dialect';",
      "export { c } from '../../tools/stack/ports';",
      "const d = require('../../tools/stack/main');",
      "const e = import('../../tools/fake-engine/server');",
      "import { f } from '../sse/parser';",
      "import { g } from 'undici';",
      "import { h } from './tools/not-the-tools-tree';",
    ].join('\n');
    expect(importsInto(file, TOOLS, text).map((x) => x.split(' -> ')[1])).toEqual([
      '../../tools/stack/envoy-config',
      '../../tools/fake-engine/dialect',
      '../../tools/stack/ports',
      '../../tools/stack/main',
      '../../tools/fake-engine/server',
    ]);
  });
});
