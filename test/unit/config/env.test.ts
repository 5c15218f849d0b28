import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '../../../src/config/env';

const BASE = { DOWNSTREAM_URL: 'http://127.0.0.1:10000' };

/** The problems of the ConfigError that loadConfig throws (fails the test when it does not throw). */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).code).toBe('GW_ERR_CONFIG_INVALID');
    expect((e as ConfigError).name).toBe('ConfigError');
    expect((e as ConfigError).message).toBe((e as ConfigError).problems.join('\n'));
    return (e as ConfigError).problems;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig: defaults', () => {
  it('only DOWNSTREAM_URL set: every documented default', () => {
    const c = loadConfig({ ...BASE });
    expect(c).toMatchObject({
      downstreamUrl: 'http://127.0.0.1:10000',
      continuationUrl: 'http://127.0.0.1:10000',
      continuationModel: undefined,
      engine: 'sglang',
      continuationEnabled: true,
      stallIdleTimeoutMs: 20_000,
      maxStallMs: 300_000,
      connectTimeoutMs: 30_000,
      upstreamHeadersTimeoutMs: 60_000,
      upstreamHttp2: false,
      upstreamHttp2StreamsPerConnection: 100,
      firstDeltaTimeoutMs: 0,
      firstDeltaDeadlineMs: 60_000,
      maxAttempts: 2,
      retryBackoffMs: 250,
      retryBackoffMaxMs: 5000,
      retryAfterMaxMs: 10_000,
      recoveryMaxConcurrent: 64,
      recoveryBudgetPercent: 20,
      recoveryAdaptive: false,
      recoveryAdaptiveTolerance: 1.5,
      maxContinuationBodyBytes: 10 * 1024 * 1024,
      maxRequestBodyBytes: 100 * 1024 * 1024,
      maxBodyJsonDepth: 128,
      cjkCharsPerToken: 1.6,
      otherCharsPerToken: 4,
      tokenizeUrl: undefined,
      tokenizeDialect: 'auto',
      bufferToolCalls: false,
      bufferStructuredOutput: false,
      unreachableStatus: 429,
      port: 50051,
      host: '127.0.0.1',
      logLevel: 'info',
    });
  });

  it('empty or blank values mean "use the default"', () => {
    const c = loadConfig({
      ...BASE,
      STALL_IDLE_TIMEOUT_SECONDS: '',
      MAX_ATTEMPTS: '  ',
      CONTINUATION_ENABLED: '',
      HOST: ' ',
      CONTINUATION_MODEL: '  ',
      CONTINUATION_URL: '',
      CONTINUATION_ENGINE: '',
      LOG_LEVEL: ' ',
    });
    expect(c).toMatchObject({
      stallIdleTimeoutMs: 20_000,
      maxAttempts: 2,
      continuationEnabled: true,
      host: '127.0.0.1',
      continuationModel: undefined,
      continuationUrl: BASE.DOWNSTREAM_URL,
      engine: 'sglang',
      logLevel: 'info',
    });
  });

  it('a blank CONTINUATION_URL or TOKENIZE_URL is unset, like every other optional variable', () => {
    expect(loadConfig({ ...BASE, CONTINUATION_URL: '   ' }).continuationUrl).toBe(BASE.DOWNSTREAM_URL);
    expect(loadConfig({ ...BASE, TOKENIZE_URL: '   ' }).tokenizeUrl).toBeUndefined();
    expect(loadConfig({ ...BASE, TOKENIZE_URL: '' }).tokenizeUrl).toBeUndefined();
  });

  it('TOKENIZE_DIALECT: auto by default, case and blanks ignored', () => {
    expect(loadConfig({ ...BASE }).tokenizeDialect).toBe('auto');
    expect(loadConfig({ ...BASE, TOKENIZE_DIALECT: ' ' }).tokenizeDialect).toBe('auto');
    expect(loadConfig({ ...BASE, TOKENIZE_DIALECT: ' LlamaCpp ' }).tokenizeDialect).toBe('llamacpp');
    for (const d of ['sglang', 'vllm', 'auto']) expect(loadConfig({ ...BASE, TOKENIZE_DIALECT: d }).tokenizeDialect).toBe(d);
  });

  it('TOKENIZE_URL is trimmed like the other URLs', () => {
    expect(loadConfig({ ...BASE, TOKENIZE_URL: ' http://engine:30000/tokenize/ ' }).tokenizeUrl).toBe('http://engine:30000/tokenize');
  });

  it('ignores unrelated variables', () => {
    expect(() => loadConfig({ ...BASE, PATH: '/bin', SOMETHING_ELSE: 'x' })).not.toThrow();
  });

  it('the returned object is frozen', () => {
    const c = loadConfig({ ...BASE });
    expect(Object.isFrozen(c)).toBe(true);
    expect(() => {
      (c as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(c.port).toBe(50051);
  });
});

describe('loadConfig: values', () => {
  it('converts seconds to ms and MB to bytes (fractions allowed)', () => {
    const c = loadConfig({
      ...BASE,
      STALL_IDLE_TIMEOUT_SECONDS: '0.5',
      MAX_STALL_SECONDS: '90',
      CONNECT_TIMEOUT_SECONDS: '3',
      UPSTREAM_HEADERS_TIMEOUT_SECONDS: '7',
      FIRST_DELTA_TIMEOUT_SECONDS: '12',
      MAX_CONTINUATION_BODY_MB: '1.5',
      MAX_REQUEST_BODY_MB: '0.001',
      MAX_BODY_JSON_DEPTH: '64',
    });
    expect(c).toMatchObject({
      stallIdleTimeoutMs: 500,
      maxStallMs: 90_000,
      connectTimeoutMs: 3_000,
      upstreamHeadersTimeoutMs: 7_000,
      firstDeltaTimeoutMs: 12_000,
      maxContinuationBodyBytes: 1_572_864,
      maxRequestBodyBytes: 1048,
      maxBodyJsonDepth: 64,
    });
  });

  it('every variable read', () => {
    const c = loadConfig({
      DOWNSTREAM_URL: ' https://egress.local:8443/ ',
      CONTINUATION_URL: 'http://cont.local:9000//',
      CONTINUATION_MODEL: ' qwen3-32b ',
      CONTINUATION_ENGINE: ' VLLM ',
      CONTINUATION_ENABLED: 'no',
      MAX_ATTEMPTS: '3',
      RECOVERY_MAX_CONCURRENT: '0',
      RECOVERY_BUDGET_PERCENT: '12.5',
      RECOVERY_ADAPTIVE: 'on',
      RECOVERY_ADAPTIVE_TOLERANCE: '3',
      CJK_CHARS_PER_TOKEN: '1.2',
      OTHER_CHARS_PER_TOKEN: '3.5',
      BUFFER_TOOL_CALLS: 'YES',
      BUFFER_STRUCTURED_OUTPUT: '1',
      UNREACHABLE_STATUS: '503',
      PORT: '0',
      HOST: ' 0.0.0.0 ',
      LOG_LEVEL: 'DEBUG',
    });
    expect(c).toMatchObject({
      downstreamUrl: 'https://egress.local:8443',
      continuationUrl: 'http://cont.local:9000',
      continuationModel: 'qwen3-32b',
      engine: 'vllm',
      continuationEnabled: false,
      maxAttempts: 3,
      recoveryMaxConcurrent: 0,
      recoveryBudgetPercent: 12.5,
      recoveryAdaptive: true,
      recoveryAdaptiveTolerance: 3,
      cjkCharsPerToken: 1.2,
      otherCharsPerToken: 3.5,
      bufferToolCalls: true,
      bufferStructuredOutput: true,
      unreachableStatus: 503,
      port: 0,
      host: '0.0.0.0',
      logLevel: 'debug',
    });
  });

  it('URL trailing slashes are trimmed, paths kept', () => {
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1/' }).downstreamUrl).toBe('http://h:1');
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1///' }).downstreamUrl).toBe('http://h:1');
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1/base/' }).downstreamUrl).toBe('http://h:1/base');
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1' }).downstreamUrl).toBe('http://h:1');
  });

  it('CONTINUATION_URL defaults to DOWNSTREAM_URL (after trimming)', () => {
    expect(loadConfig({ DOWNSTREAM_URL: 'http://down:1/' }).continuationUrl).toBe('http://down:1');
    expect(loadConfig({ DOWNSTREAM_URL: 'http://down:1/', CONTINUATION_URL: 'http://cont:2/' }).continuationUrl).toBe('http://cont:2');
  });

  it('booleans: true/false/1/0/yes/no in any case, with surrounding spaces', () => {
    for (const v of ['true', 'TRUE', 'True', '1', 'yes', 'YES', 'Yes', ' true '])
      expect({ v, b: loadConfig({ ...BASE, BUFFER_TOOL_CALLS: v }).bufferToolCalls }).toEqual({ v, b: true });
    for (const v of ['false', 'FALSE', 'False', '0', 'no', 'NO', 'No', ' no '])
      expect({ v, b: loadConfig({ ...BASE, CONTINUATION_ENABLED: v }).continuationEnabled }).toEqual({ v, b: false });
  });

  it('timer values up to the largest Node timer are accepted', () => {
    expect(loadConfig({ ...BASE, STALL_IDLE_TIMEOUT_SECONDS: '2147483' }).stallIdleTimeoutMs).toBe(2_147_483_000);
    expect(loadConfig({ ...BASE, MAX_STALL_SECONDS: '1e9' }).maxStallMs).toBe(1e12);
  });

  it('port and status bounds are inclusive', () => {
    expect(loadConfig({ ...BASE, PORT: '65535', UNREACHABLE_STATUS: '599' })).toMatchObject({ port: 65535, unreachableStatus: 599 });
    expect(loadConfig({ ...BASE, UNREACHABLE_STATUS: '400' }).unreachableStatus).toBe(400);
  });
});

describe('loadConfig: failures before the first delta', () => {
  it('the deadline, the backoff and the Retry-After bound, in seconds; 0 = no backoff, no Retry-After waited', () => {
    expect(
      loadConfig({
        ...BASE,
        FIRST_DELTA_DEADLINE_SECONDS: '12.5',
        RETRY_BACKOFF_SECONDS: '0',
        RETRY_BACKOFF_MAX_SECONDS: '2',
        RETRY_AFTER_MAX_SECONDS: '0',
      }),
    ).toMatchObject({ firstDeltaDeadlineMs: 12_500, retryBackoffMs: 0, retryBackoffMaxMs: 2000, retryAfterMaxMs: 0 });
  });
});

describe('loadConfig: errors', () => {
  it('DOWNSTREAM_URL is required', () => {
    expect(problems({})).toEqual(['config error: DOWNSTREAM_URL is required']);
  });

  const BAD: Array<[string, string]> = [
    ['DOWNSTREAM_URL', 'ftp://h/'],
    ['DOWNSTREAM_URL', 'not a url'],
    ['DOWNSTREAM_URL', ''],
    ['CONTINUATION_URL', 'nope'],
    ['CONTINUATION_URL', 'file:///tmp/x'],
    ['TOKENIZE_URL', 'engine:30000'],
    ['TOKENIZE_URL', 'ws://engine/tokenize'],
    ['CONTINUATION_ENGINE', 'tgi'],
    ['TOKENIZE_DIALECT', 'tgi'],
    ['TOKENIZE_DIALECT', 'llama'],
    ['CONTINUATION_ENABLED', 'maybe'],
    ['CONTINUATION_ENABLED', '2'],
    ['RECOVERY_ADAPTIVE', 'auto'],
    ['UPSTREAM_HTTP2_STREAMS_PER_CONNECTION', '0'],
    ['UPSTREAM_HTTP2_STREAMS_PER_CONNECTION', '1.5'],
    ['UPSTREAM_HTTP2_STREAMS_PER_CONNECTION', '10001'],
    ['RECOVERY_ADAPTIVE_TOLERANCE', '0.5'],
    ['RECOVERY_ADAPTIVE_TOLERANCE', '0'],
    ['RECOVERY_ADAPTIVE_TOLERANCE', 'x'],
    ['RECOVERY_ADAPTIVE_TOLERANCE', '101'],
    ['STALL_IDLE_TIMEOUT_SECONDS', 'abc'],
    ['STALL_IDLE_TIMEOUT_SECONDS', '0'],
    ['STALL_IDLE_TIMEOUT_SECONDS', '-1'],
    ['STALL_IDLE_TIMEOUT_SECONDS', 'Infinity'],
    ['STALL_IDLE_TIMEOUT_SECONDS', '2147484'],
    ['MAX_STALL_SECONDS', '0'],
    ['MAX_STALL_SECONDS', 'NaN'],
    ['CONNECT_TIMEOUT_SECONDS', 'x'],
    ['CONNECT_TIMEOUT_SECONDS', '1e10'],
    ['UPSTREAM_HEADERS_TIMEOUT_SECONDS', '-5'],
    ['UPSTREAM_HEADERS_TIMEOUT_SECONDS', '3000000'],
    ['FIRST_DELTA_TIMEOUT_SECONDS', '-1'],
    ['FIRST_DELTA_TIMEOUT_SECONDS', '99999999'],
    ['FIRST_DELTA_DEADLINE_SECONDS', '0'],
    ['FIRST_DELTA_DEADLINE_SECONDS', '-60'],
    ['FIRST_DELTA_DEADLINE_SECONDS', '99999999'],
    ['FIRST_DELTA_DEADLINE_SECONDS', 'a minute'],
    ['MAX_ATTEMPTS', '0'],
    ['MAX_ATTEMPTS', '1.5'],
    ['RETRY_BACKOFF_SECONDS', '-0.1'],
    ['RETRY_BACKOFF_SECONDS', '250ms'],
    ['RETRY_BACKOFF_MAX_SECONDS', '-1'],
    ['RETRY_BACKOFF_MAX_SECONDS', '99999999'],
    ['RETRY_AFTER_MAX_SECONDS', '-1'],
    ['RETRY_AFTER_MAX_SECONDS', 'never'],
    ['RECOVERY_MAX_CONCURRENT', '-1'],
    ['RECOVERY_MAX_CONCURRENT', '2.5'],
    ['RECOVERY_BUDGET_PERCENT', '-1'],
    ['RECOVERY_BUDGET_PERCENT', '20%'],
    ['MAX_CONTINUATION_BODY_MB', '0'],
    ['MAX_REQUEST_BODY_MB', 'big'],
    ['MAX_BODY_JSON_DEPTH', '0'],
    ['MAX_BODY_JSON_DEPTH', '64.5'],
    ['MAX_BODY_JSON_DEPTH', '5000'],
    ['CJK_CHARS_PER_TOKEN', '0'],
    ['OTHER_CHARS_PER_TOKEN', '-4'],
    ['BUFFER_TOOL_CALLS', 'on-ish'],
    ['BUFFER_STRUCTURED_OUTPUT', 'nah'],
    ['UNREACHABLE_STATUS', '200'],
    ['UNREACHABLE_STATUS', '600'],
    ['UNREACHABLE_STATUS', '429.5'],
    ['PORT', '-1'],
    ['PORT', '65536'],
    ['PORT', 'http'],
    ['LOG_LEVEL', 'loud'],
  ];

  it.each(BAD)('%s=%j gives exactly one line naming the variable', (name, value) => {
    const env = name === 'DOWNSTREAM_URL' ? { DOWNSTREAM_URL: value } : { ...BASE, [name]: value };
    const p = problems(env);
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(new RegExp(`^config error: ${name} \\S`));
    expect(p[0]).not.toMatch(/Invalid input/);
    expect(p[0]).not.toContain('\n');
  });

  it('number messages quote the bad value and say what was expected', () => {
    expect(problems({ ...BASE, STALL_IDLE_TIMEOUT_SECONDS: 'abc' })).toEqual([
      'config error: STALL_IDLE_TIMEOUT_SECONDS expected a positive number <= 2147483, got "abc"',
    ]);
    expect(problems({ ...BASE, MAX_ATTEMPTS: '0' })).toEqual(['config error: MAX_ATTEMPTS expected a >= 1 integer, got "0"']);
    expect(problems({ ...BASE, PORT: '65536' })).toEqual(['config error: PORT expected a >= 0 integer <= 65535, got "65536"']);
    expect(problems({ ...BASE, CONTINUATION_ENABLED: 'maybe' })).toEqual([
      'config error: CONTINUATION_ENABLED expected true or false, got "maybe"',
    ]);
    expect(problems({ ...BASE, CONTINUATION_URL: 'nope' })).toEqual(['config error: CONTINUATION_URL expected an http(s) URL, got "nope"']);
  });

  it('several bad variables give several lines in one ConfigError, one per variable', () => {
    const p = problems({
      STALL_IDLE_TIMEOUT_SECONDS: 'abc',
      MAX_ATTEMPTS: '0',
      LOG_LEVEL: 'loud',
      BUFFER_TOOL_CALLS: 'maybe',
      PORT: '99999',
    });
    expect(p).toHaveLength(6);
    const named = p.map((l) => /^config error: (\S+) /.exec(l)?.[1]).sort();
    expect(named).toEqual(['BUFFER_TOOL_CALLS', 'DOWNSTREAM_URL', 'LOG_LEVEL', 'MAX_ATTEMPTS', 'PORT', 'STALL_IDLE_TIMEOUT_SECONDS']);
  });
});

describe('the sidecar process with a bad variable', () => {
  it('exits 2 with exactly one stderr line naming it', () => {
    const main = path.resolve(__dirname, '../../../src/main.js');
    const r = spawnSync(process.execPath, [main], {
      env: { PATH: process.env.PATH ?? '', DOWNSTREAM_URL: 'http://127.0.0.1:1', STALL_IDLE_TIMEOUT_SECONDS: 'abc' },
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(r.error).toBeUndefined();
    expect(r.signal).toBeNull();
    expect(r.status).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^config error: STALL_IDLE_TIMEOUT_SECONDS .*"abc"$/);
    expect(r.stdout).toBe('');
  });
});
