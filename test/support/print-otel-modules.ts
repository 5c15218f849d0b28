// Preloaded (`node -r`) into a sidecar process by test/unit/obs/tracing.test.ts: at exit, prints how many modules
// of the OpenTelemetry SDK the process ever loaded, so a test can see that tracing off loads none. The API
// package (@opentelemetry/api) is not counted: prom-client requires it for exemplars whenever it is installed.
process.on('exit', () => {
  const sdk = Object.keys(require.cache).filter((f) => f.includes('/@opentelemetry/') && !f.includes('/@opentelemetry/api/'));
  process.stderr.write(`OTEL_SDK_MODULES_LOADED ${sdk.length}\n`);
});
