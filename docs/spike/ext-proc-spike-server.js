const grpc = require('../../node_modules/@grpc/grpc-js');
const loader = require('../../node_modules/@grpc/proto-loader');
const def = loader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
  includeDirs: [require('node:path').join(__dirname, '../../proto')],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const pkg = grpc.loadPackageDefinition(def);
const svc = pkg.envoy.service.ext_proc.v3.ExternalProcessor.service;
const server = new grpc.Server();
let n = 0;
server.addService(svc, {
  Process(call) {
    const id = ++n;
    const t0 = Date.now();
    let mode = 'sir';
    const body = [];
    const log = (...a) => console.log(`[${id} +${Date.now() - t0}ms]`, ...a);
    call.on('data', (m) => {
      const kind = m.request;
      if (kind === 'request_headers') {
        const h = Object.fromEntries(m.request_headers.headers.headers.map((x) => [x.key, (x.raw_value || Buffer.alloc(0)).toString()]));
        mode = h['x-spike'] || 'sir';
        log(
          'request_headers eos=',
          m.request_headers.end_of_stream,
          'mode',
          mode,
          'protocol_config',
          JSON.stringify(m.protocol_config),
          'path',
          h[':path'],
        );
        if (mode === 'continue') call.write({ request_headers: { response: { status: 'CONTINUE' } } });
      } else if (kind === 'request_body') {
        log('request_body len', m.request_body.body.length, 'eos', m.request_body.end_of_stream);
        body.push(m.request_body.body);
        if (mode === 'continue') {
          call.write({
            request_body: {
              response: {
                body_mutation: { streamed_response: { body: m.request_body.body, end_of_stream: m.request_body.end_of_stream } },
              },
            },
          });
        } else if (m.request_body.end_of_stream) {
          const full = Buffer.concat(body).toString();
          log('full body', full.length);
          const go = () =>
            call.write({
              streamed_immediate_response: {
                headers_response: {
                  headers: {
                    headers: [
                      { key: ':status', raw_value: Buffer.from('200') },
                      { key: 'content-type', raw_value: Buffer.from('text/event-stream') },
                    ],
                  },
                },
              },
            });
          if (mode === 'sir-late') {
            setTimeout(() => {
              log('late headers');
              go();
              start();
            }, 7000);
            return;
          }
          go();
          start();
          function start() {
            let i = 0;
            const tick = setInterval(
              () => {
                i++;
                const last = i === 5;
                if (mode === 'sir-abort' && i === 3) {
                  log('server cancels grpc stream with error');
                  clearInterval(tick);
                  call.emit('error', new Error('x'));
                  call.destroy(new Error('boom'));
                  return;
                }
                log('write body chunk', i, 'last', last);
                call.write({
                  streamed_immediate_response: { body_response: { body: Buffer.from(`data: {"i":${i}}\n\n`), end_of_stream: last } },
                });
                if (last) {
                  clearInterval(tick);
                  if (mode !== 'sir-keepopen') call.end();
                }
              },
              mode === 'sir-slow' ? 1000 : 50,
            );
            call.on('cancelled', () => {
              log('grpc cancelled');
              clearInterval(tick);
            });
          }
        }
      } else if (kind === 'request_trailers') {
        log('request_trailers');
      } else log('other', kind);
    });
    call.on('end', () => log('client half-close (end)'));
    call.on('cancelled', () => log('cancelled'));
    call.on('error', (e) => log('error', e.code, e.message));
    call.on('close', () => log('close'));
  },
});
server.bindAsync('127.0.0.1:18081', grpc.ServerCredentials.createInsecure(), () => console.log('ext_proc listening'));
