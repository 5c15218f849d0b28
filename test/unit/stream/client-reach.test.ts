// Issue 29: the request owns the client side. Only src/stream/originated-response.ts builds a ClientSide
// (src/stream/client-side.ts), the one object that writes to the ext_proc stream, and no other module of
// src/ writes a response body or head: every step returns what the client should get (an Ending, Outgoing
// bytes through the request's deliver()). A helper that tried to reach the client would have to import one
// of these, and fails this test.
import * as fs from 'node:fs';
import * as path from 'node:path';

const SRC = path.resolve(__dirname, '../../../../src');

function sources(dir = SRC): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const rel = (f: string) => path.relative(SRC, f).split(path.sep).join('/');

describe('who can write to the client', () => {
  const files = sources().map((f) => ({ name: rel(f), text: fs.readFileSync(f, 'utf8') }));

  it('found the sources', () => {
    expect(files.map((f) => f.name)).toEqual(expect.arrayContaining(['stream/originated-response.ts', 'stream/client-side.ts']));
  });

  it('only the request module imports the client side', () => {
    const importers = files.filter((f) => /from '(\.\.?\/)+(stream\/)?client-side'/.test(f.text)).map((f) => f.name);
    expect(importers).toEqual(['stream/originated-response.ts']);
    const builders = files.filter((f) => /new ClientSide\(/.test(f.text)).map((f) => f.name);
    expect(builders).toEqual(['stream/originated-response.ts']);
  });

  it('nothing else sends a response head or body to the ext_proc stream', () => {
    const writers = files
      .filter((f) => /\.sendResponse(Body|Headers)\(/.test(f.text))
      .map((f) => f.name)
      .sort();
    expect(writers).toEqual(['stream/client-side.ts']);
  });

  it('no step of src/stream or src/continuation holds the request, the ext_proc stream or the whole gateway context', () => {
    const steps = files.filter(
      (f) =>
        (f.name.startsWith('stream/') || f.name.startsWith('continuation/')) &&
        !['stream/originated-response.ts', 'stream/request-exchange.ts', 'stream/client-side.ts', 'stream/context.ts'].includes(f.name),
    );
    const offenders = steps
      .filter((f) =>
        /from '(\.\.?\/)+(stream\/)?originated-response'|from '(\.\.\/)+extproc\/processor-stream'|: GatewayContext\b/.test(f.text),
      )
      .map((f) => f.name);
    // request-view.ts builds the steps' read-only view from the context: it is the one adapter that reads it.
    expect(offenders).toEqual(['stream/request-view.ts']);
  });
});
