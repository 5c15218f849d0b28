import { Writable } from 'node:stream';
import { boundRecord, identifier, jsonType, MAX_LOG_STRING, smallInt } from '../../../src/obs/log-values';
import { createLogger } from '../../../src/obs/logger';

const SECRET = 'secret text of the prompt';

describe('log values: bounded, typed, never text', () => {
  it('smallInt: the integer, else its JSON type', () => {
    expect([3, -2, 0, 1_000_000].map((v) => smallInt(v))).toEqual(['3', '-2', '0', '1000000']);
    expect([1e20, 2.5, Number.NaN, 'A'.repeat(1e6), [SECRET], { a: SECRET }, null, true, undefined].map((v) => smallInt(v))).toEqual([
      '<number>',
      '<number>',
      '<number>',
      '<string>',
      '<array>',
      '<object>',
      '<null>',
      '<boolean>',
      '<undefined>',
    ]);
  });
  it('jsonType', () => {
    expect([null, [], {}, 'x', 1, false, undefined].map(jsonType)).toEqual([
      'null',
      'array',
      'object',
      'string',
      'number',
      'boolean',
      'undefined',
    ]);
  });
  it('identifier: ids and model names as they are; sentences, long strings and structures by their shape', () => {
    for (const id of [
      '3f2c9a1e-8b7d-4c4e-9f1a-2b3c4d5e6f70',
      'chatcmpl-replica-b-1',
      'Qwen/Qwen3-32B',
      '127.0.0.1:37003',
      'fp_44709d6fcb',
      'fuzz-1-2-a2',
    ])
      expect(identifier(id)).toBe(id);
    expect(identifier(SECRET)).toBe(`<string ${SECRET.length}>`);
    // Longer than 128: its head, the cut visible with the length it had; applied twice, unchanged.
    expect(identifier('x'.repeat(129))).toBe(`${'x'.repeat(128)}...[cut 129]`);
    expect(identifier(identifier('r'.repeat(10240)))).toBe(`${'r'.repeat(128)}...[cut 10240]`);
    expect(identifier(`${'x'.repeat(128)}...[cut 129] more`)).toBe('<string 145>');
    expect(identifier('id\n{"level":"error"}')).toBe('<string 20>');
    expect(identifier(identifier(SECRET))).toBe(`<string ${SECRET.length}>`);
    expect(identifier(['a'])).toBe('<array>');
    expect([null, undefined, 7].map(identifier)).toEqual([null, undefined, 7]);
  });
  it('boundRecord: every string capped, identifier fields checked, nesting and breadth bounded', () => {
    const huge = 'A'.repeat(1_000_000);
    const out = boundRecord({
      detail: huge,
      model: SECRET,
      request_id: 'ok-id',
      nested: { a: { b: { c: { d: 1 } } } },
      list: Array.from({ length: 100 }, (_, i) => i),
      [huge]: 1,
    });
    expect(out.detail).toBe(`${'A'.repeat(MAX_LOG_STRING)}…(1000000 chars)`);
    expect(out.model).toBe(`<string ${SECRET.length}>`);
    expect(out.request_id).toBe('ok-id');
    expect(out.nested).toEqual({ a: { b: { c: '<object>' } } });
    expect((out.list as unknown[]).length).toBe(33);
    expect(JSON.stringify(out).length).toBeLessThan(2000);
  });
  it('errors are left to pino', () => {
    const err = new Error('boom');
    expect(boundRecord({ err }).err).toBe(err);
  });
});

describe('the logger applies them to every record and to child bindings', () => {
  function capture() {
    const lines: string[] = [];
    const dest = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    return { log: createLogger('info', dest as any), lines };
  }
  it('a 1 MB value makes no 1 MB line, a text-bearing identifier is not written, a child request id neither', async () => {
    const { log, lines } = capture();
    log.info({ decision: 'PASSTHROUGH', reason: 'x', detail: `n=${'A'.repeat(1_048_576)}`, model: `${SECRET} FzMk7q` }, 'PASSTHROUGH');
    log.child({ request_id: `${SECRET}${'v'.repeat(6000)}` }).warn({ decision: 'FAILED' }, 'm');
    log.child({ request_id: 'rid-1' }).info({ completion_id: 'chatcmpl-1' }, 'm');
    log.error({ err: new Error('kept') }, 'm');
    log.error({ err: new TypeError(`${SECRET}${'x'.repeat(5000)}`) }, 'm');
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(5);
    expect(JSON.parse(lines[3]).err).toMatchObject({ type: 'Error', message: 'kept' });
    expect(JSON.parse(lines[3]).err.stack).toMatch(/^Error: kept\n\s+at /);
    // A message is capped like any string; the stack (which repeats it) is bounded too.
    const long = JSON.parse(lines[4]).err;
    expect(long.message.length).toBeLessThan(300);
    expect(long.stack).toMatch(/^TypeError: secret text of the promptx+…\(5025 chars\)\n\s+at /);
    expect(long.stack.length).toBeLessThan(4097);
    lines.splice(3);
    for (const l of lines) {
      expect(l.length).toBeLessThan(1000);
      expect(l).not.toContain(SECRET);
      expect(l).not.toContain('FzMk7q');
    }
    expect(JSON.parse(lines[1]).request_id).toBe('<string 6025>');
    expect(JSON.parse(lines[2])).toMatchObject({ request_id: 'rid-1', completion_id: 'chatcmpl-1', svc: 'continuation-gateway' });
  });
});
