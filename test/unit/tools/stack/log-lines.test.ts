import { formatLine, stackLogFormat } from '../../../../tools/stack/log-lines';

describe("the stack's stderr lines", () => {
  it('prefixed on a terminal, JSON when piped; STACK_LOG_FORMAT overrides', () => {
    expect(stackLogFormat(undefined, true)).toBe('prefixed');
    expect(stackLogFormat(undefined, false)).toBe('json');
    expect(stackLogFormat('prefixed', false)).toBe('prefixed');
    expect(stackLogFormat(' JSON ', true)).toBe('json');
  });

  it("JSON: a child's record keeps its fields with its source first; any other line is wrapped", () => {
    const now = new Date('2026-12-02T00:00:00.000Z');
    expect(JSON.parse(formatLine('json', 'sidecar', '{"level":"info","decision":"TRIGGERED"}', now))).toEqual({
      source: 'sidecar',
      level: 'info',
      decision: 'TRIGGERED',
    });
    expect(formatLine('json', 'envoy', '[2026-12-02 00:00:00.000][1][info][main] starting {x}', now)).toBe(
      '{"source":"envoy","time":"2026-12-02T00:00:00.000Z","msg":"[2026-12-02 00:00:00.000][1][info][main] starting {x}"}\n',
    );
    expect(JSON.parse(formatLine('json', 'x', '{not json}', now)).msg).toBe('{not json}');
    expect(formatLine('prefixed', 'sidecar', '{"a":1}')).toBe('[sidecar] {"a":1}\n');
  });
});
