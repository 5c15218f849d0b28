import {
  clientResponseHeaders,
  isRouterTierUnreachable,
  legRequestHeaders,
  UPSTREAM_FLAGS_HEADER,
} from '../../../src/request/forward-headers';

describe('legRequestHeaders', () => {
  const client: Record<string, string> = {
    ':method': 'POST',
    ':path': '/v1/chat/completions',
    ':authority': 'gateway.example',
    ':scheme': 'https',
    host: 'gateway.example',
    connection: 'keep-alive',
    'keep-alive': 'timeout=5',
    'proxy-authorization': 'Basic cHJveHk=',
    'proxy-authenticate': 'Basic',
    'proxy-connection': 'keep-alive',
    te: 'trailers',
    trailer: 'x-t',
    'transfer-encoding': 'chunked',
    upgrade: 'h2c',
    'content-length': '123',
    expect: '100-continue',
    'x-envoy-internal': 'true',
    'x-envoy-expected-rq-timeout-ms': '15000',
    'x-request-id': 'client-supplied',
    'accept-encoding': 'gzip, br',
    authorization: 'Bearer sk-secret',
    'content-type': 'application/json; charset=utf-8',
    accept: 'text/event-stream',
    'user-agent': 'OpenAI/Python 1.0',
    'x-custom-tenant': 'acme',
    'x-forwarded-for': '10.0.0.1',
  };

  it('drops hop-by-hop, pseudo and x-envoy-* headers, keeps the rest, replaces x-request-id', () => {
    expect(legRequestHeaders(client, 'gw-req-1')).toEqual({
      authorization: 'Bearer sk-secret',
      'content-type': 'application/json; charset=utf-8',
      accept: 'text/event-stream',
      'user-agent': 'OpenAI/Python 1.0',
      'x-custom-tenant': 'acme',
      'x-forwarded-for': '10.0.0.1',
      'x-request-id': 'gw-req-1',
      'accept-encoding': 'identity',
    });
  });

  it('authorization reaches the engine unchanged', () => {
    expect(legRequestHeaders({ authorization: 'Bearer abc' }, 'r').authorization).toBe('Bearer abc');
  });

  it('without a request id the client x-request-id is dropped, not forwarded', () => {
    const h = legRequestHeaders({ 'x-request-id': 'client', 'content-type': 'application/json' }, undefined);
    expect(h).not.toHaveProperty('x-request-id');
    expect(legRequestHeaders({ 'x-request-id': 'client' }, '')).not.toHaveProperty('x-request-id');
  });

  it('content-type: a JSON type is kept, anything else or absent becomes application/json', () => {
    expect(legRequestHeaders({ 'content-type': 'application/json' }, 'r')['content-type']).toBe('application/json');
    expect(legRequestHeaders({ 'content-type': 'text/plain' }, 'r')['content-type']).toBe('application/json');
    expect(legRequestHeaders({}, 'r')['content-type']).toBe('application/json');
  });

  it('always asks the upstream for the identity coding (the leg bytes are parsed as SSE)', () => {
    expect(legRequestHeaders({ 'accept-encoding': 'gzip' }, 'r')['accept-encoding']).toBe('identity');
    expect(legRequestHeaders({}, 'r')['accept-encoding']).toBe('identity');
  });

  it('does not modify its input', () => {
    const copy = { ...client };
    legRequestHeaders(client, 'x');
    expect(client).toEqual(copy);
  });
});

describe('clientResponseHeaders', () => {
  it('drops hop-by-hop, our flags header, date/server and pseudo headers; lowercases; joins arrays', () => {
    const out = clientResponseHeaders({
      'Content-Type': 'text/event-stream',
      'content-length': '10',
      'transfer-encoding': 'chunked',
      connection: 'keep-alive',
      'keep-alive': 'timeout=5',
      date: 'Mon, 01 Jan 2024 00:00:00 GMT',
      server: 'uvicorn',
      [UPSTREAM_FLAGS_HEADER]: '-',
      ':status': '200',
      'x-engine': 'sglang',
      'cache-control': 'no-cache',
      vary: ['accept', 'origin'],
      'x-undefined': undefined,
    });
    expect(out).toEqual({ 'content-type': 'text/event-stream', 'x-engine': 'sglang', 'cache-control': 'no-cache', vary: 'accept, origin' });
  });
});

describe('isRouterTierUnreachable', () => {
  const h = (v: string | string[] | undefined) => ({ [UPSTREAM_FLAGS_HEADER]: v });

  it.each(['UF', 'UH', 'UO', 'NC', 'UF,URX', 'URX,UF', 'DC,UH', 'UT, UO'])('flags %j: unreachable', (flags) => {
    expect(isRouterTierUnreachable(h(flags))).toBe(true);
  });

  it.each(['-', '', 'UT', 'DC', 'UC', 'LR', 'URX', 'URXX', 'uf', 'XUF'])('flags %j: not unreachable', (flags) => {
    expect(isRouterTierUnreachable(h(flags))).toBe(false);
  });

  it('absent header: not unreachable', () => {
    expect(isRouterTierUnreachable({})).toBe(false);
    expect(isRouterTierUnreachable(h(undefined))).toBe(false);
    expect(isRouterTierUnreachable({ 'content-type': 'text/plain' })).toBe(false);
  });

  it('array values (repeated header) are considered', () => {
    expect(isRouterTierUnreachable(h(['-', 'UH']))).toBe(true);
    expect(isRouterTierUnreachable(h(['-', 'DC']))).toBe(false);
  });

  it('the header name is x-gateway-upstream-flags', () => {
    expect(UPSTREAM_FLAGS_HEADER).toBe('x-gateway-upstream-flags');
    expect(isRouterTierUnreachable({ 'x-gateway-upstream-flags': 'UF' })).toBe(true);
  });
});
