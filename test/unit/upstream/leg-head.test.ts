import { classifyLegHead } from '../../../src/upstream/leg-head';

describe('classifyLegHead', () => {
  it('200 text/event-stream (any case, with parameters): the answer streams', () => {
    expect(classifyLegHead(200, { 'content-type': 'text/event-stream' })).toBe('event-stream');
    expect(classifyLegHead(200, { 'content-type': 'Text/Event-Stream; charset=utf-8' })).toBe('event-stream');
  });
  it('a 200 that is no event stream (issue 19): never relayed as an empty stream', () => {
    for (const ctype of ['text/plain', 'application/json', 'text/html; charset=utf-8', undefined])
      expect(classifyLegHead(200, ctype === undefined ? {} : { 'content-type': ctype })).toBe('not-event-stream');
  });
  it('other statuses as before', () => {
    expect(classifyLegHead(503, {})).toBe('overloaded');
    expect(classifyLegHead(502, {})).toBe('server-error');
    expect(classifyLegHead(429, { 'content-type': 'application/json' })).toBe('other-answer');
    expect(classifyLegHead(404, {})).toBe('other-answer');
  });
});
