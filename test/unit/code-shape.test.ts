// Issue 29: files a newcomer can hold. No file of src/ (the product) over 300 lines, and no function of it over
// 60, measured on the TypeScript syntax tree (comments and blank lines inside a
// function count: they are what a reader reads). Declarative blocks are not exempt: a metric family is a class
// field (src/obs/metrics.ts), not a line of a constructor. tools/ (the stack, the fake engine) is not measured.
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

const SRC = path.resolve(__dirname, '../../../src');
const MAX_FILE_LINES = 300;
const MAX_FUNCTION_LINES = 60;

function sources(dir = SRC): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const rel = (f: string) => path.relative(SRC, f).split(path.sep).join('/');

/** Every function-like node with a body: its name (or where it is) and its length in lines. */
function functionLengths(file: string, text = fs.readFileSync(file, 'utf8')): Array<{ name: string; lines: number }> {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Array<{ name: string; lines: number }> = [];
  const visit = (n: ts.Node) => {
    if (ts.isFunctionLike(n) && 'body' in n && n.body) {
      const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
      const named = (n as ts.FunctionLikeDeclaration).name;
      const name = named ? named.getText(sf) : `(anonymous at line ${start + 1})`;
      out.push({ name, lines: end - start + 1 });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

describe('code shape', () => {
  it(`no file of src/ is over ${MAX_FILE_LINES} lines`, () => {
    const long = sources()
      .map((f) => ({ f: rel(f), lines: fs.readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter((x) => x.lines > MAX_FILE_LINES)
      .map((x) => `${x.f}: ${x.lines}`);
    expect(long).toEqual([]);
  });

  it(`no function of src/ is over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = sources().flatMap((f) =>
      functionLengths(f)
        .filter((x) => x.lines > MAX_FUNCTION_LINES)
        .map((x) => `${rel(f)} ${x.name}: ${x.lines}`),
    );
    expect(long).toEqual([]);
  });

  it('measures what it claims: functions, methods and arrow functions, nested ones too', () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = [
      `export function long() {\n${body(70)}\n}`,
      `class C {\n  method() {\n${body(3)}\n  }\n}`,
      `const f = () => {\n  const g = () => {\n${body(61)}\n  };\n};`,
    ].join('\n');
    const got = functionLengths('synthetic.ts', text);
    expect(got).toEqual([
      { name: 'long', lines: 72 },
      { name: 'method', lines: 5 },
      { name: '(anonymous at line 80)', lines: 65 },
      { name: '(anonymous at line 81)', lines: 63 },
    ]);
  });
});
