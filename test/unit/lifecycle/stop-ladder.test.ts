import { nextStopLevel } from '../../../src/lifecycle/stop-ladder';

describe('nextStopLevel: one step per signal', () => {
  test.each([
    ['running', 'SIGTERM', 'draining'],
    ['running', 'SIGHUP', 'draining'],
    ['running', 'SIGINT', 'stopping-now'],
    ['draining', 'SIGTERM', 'stopping-now'],
    ['draining', 'SIGINT', 'stopping-now'],
    ['stopping-now', 'SIGTERM', 'exiting'],
    ['stopping-now', 'SIGINT', 'exiting'],
    ['exiting', 'SIGINT', 'exiting'],
  ] as const)('%s + %s -> %s', (from, signal, to) => {
    expect(nextStopLevel(from, signal)).toBe(to);
  });
});
