import { formatLine, stackLogFormat } from '../../../../tools/stack/log-lines';

describe("the stack's stderr lines", () => {
  it('prefixed on a terminal, JSON when piped; STACK_LOG_FORMAT overrides', () => {
    expect(stackLogFormat(undefined, true)).toBe('prefixed');
    expect(stackLogFormat(undefined, false)).toBe('json');
    expect(stackLogFormat('prefixed', false)).toBe('prefixed');
    expect(stackLogFormat(' JSON ', true)).toBe('json');
  });

  it("JSON: a child's record keeps its fields with its process first; any other line is wrapped", () => {
    const now = new Date('2026-12-02T00:00:00.000Z');
    expect(JSON.parse(formatLine('json', 'sidecar', '{"level":"info","decision":"TRIGGERED"}', now))).toEqual({
      process: 'sidecar',
      level: 'info',
      decision: 'TRIGGERED',
    });
    expect(formatLine('json', 'envoy', '[2026-12-02 00:00:00.000][1][info][main] starting {x}', now)).toBe(
      '{"process":"envoy","time":"2026-12-02T00:00:00.000Z","msg":"[2026-12-02 00:00:00.000][1][info][main] starting {x}"}\n',
    );
    expect(JSON.parse(formatLine('json', 'x', '{not json}', now)).msg).toBe('{not json}');
    expect(formatLine('prefixed', 'sidecar', '{"a":1}')).toBe('[sidecar] {"a":1}\n');
  });

  it("a record's own `source` (ATTEMPT's leg-2 design source) stays its own, an object", () => {
    const attempt = { level: 'info', decision: 'ATTEMPT', leg: 2, source: 'generic', msg: 'ATTEMPT' };
    expect(JSON.parse(formatLine('json', 'sidecar', JSON.stringify(attempt)))).toEqual({ process: 'sidecar', ...attempt });
  });

  it('a record that carries `process` itself comes whole under `record`, never overwritten or flattened to a string', () => {
    const now = new Date('2026-12-02T00:00:00.000Z');
    const line = formatLine('json', 'replica-a', '{"process":"vllm-worker","msg":"x"}', now);
    expect(JSON.parse(line)).toEqual({
      process: 'replica-a',
      time: '2026-12-02T00:00:00.000Z',
      record: { process: 'vllm-worker', msg: 'x' },
    });
  });
});
