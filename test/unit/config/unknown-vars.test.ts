import { CONFIG_VARIABLES } from '../../../src/config/env';
import { editDistance, nearMisses } from '../../../src/config/unknown-vars';
import { logFamily } from '../../../src/families/startup-log';

describe('unknown variables close to a known one', () => {
  it('counts a transposition as one edit', () => {
    expect(editDistance('CONTINUATION_MODLE', 'CONTINUATION_MODEL')).toBe(1);
    expect(editDistance('ABC', 'ABC')).toBe(0);
    expect(editDistance('MAX_ATTEMPT', 'MAX_ATTEMPTS')).toBe(1);
  });

  it('names the misspelled variable and the one it was meant to be', () => {
    expect(
      nearMisses(
        ['CONTINUATION_MODLE', 'CONTINUATON_ENGINE', 'MAX_ATTEMPT', 'STALL_IDLE_TIMEOUT_SECOND', 'WORKER', 'ADMIN_HOSTS'],
        CONFIG_VARIABLES,
      ),
    ).toEqual([
      { variable: 'CONTINUATION_MODLE', didYouMean: 'CONTINUATION_MODEL' },
      { variable: 'CONTINUATON_ENGINE', didYouMean: 'CONTINUATION_ENGINE' },
      { variable: 'MAX_ATTEMPT', didYouMean: 'MAX_ATTEMPTS' },
      { variable: 'STALL_IDLE_TIMEOUT_SECOND', didYouMean: 'STALL_IDLE_TIMEOUT_SECONDS' },
      { variable: 'WORKER', didYouMean: 'WORKERS' },
      { variable: 'ADMIN_HOSTS', didYouMean: 'ADMIN_HOST' },
    ]);
  });

  it("ignores known names, the machine's variables and names that are not ours", () => {
    const machine = ['HOME', 'PATH', 'HOST', 'HOSTNAME', 'PWD', 'OLDPWD', 'LANG', 'TERM', 'SHLVL', 'NODE_ENV', 'npm_config_cache', 'PORTS'];
    const kubernetes = ['INFERENCE_GATEWAY_PORT', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_PORT_443_TCP'];
    expect(
      nearMisses([...CONFIG_VARIABLES, ...machine, ...kubernetes, 'MAX_TOKENS', 'OTEL_EXPORTER_OTLP_ENDPOINT'], CONFIG_VARIABLES),
    ).toEqual([]);
  });
});

describe('CONTINUATION_MODEL unset', () => {
  it('is a warning that nothing is in scope', () => {
    const seen: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
    const log = {
      warn: (obj: Record<string, unknown>, msg: string) => seen.push({ level: 'warn', obj, msg }),
      info: (obj: Record<string, unknown>, msg: string) => seen.push({ level: 'info', obj, msg }),
    };
    for (const continuationModel of [undefined, '  ']) {
      seen.length = 0;
      logFamily(log as never, { continuationModel, engine: 'sglang' });
      expect(seen).toEqual([
        {
          level: 'warn',
          obj: expect.objectContaining({ decision: 'FAMILY_UNSET' }),
          msg: expect.stringContaining('no request is in scope'),
        },
      ]);
    }
  });
});
