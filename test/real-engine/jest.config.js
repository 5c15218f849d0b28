// The real-engine suite (llama.cpp's llama-server + SmolLM2-135M behind the real Envoy and the sidecar):
// a separate jest run, so that `npm test` stays fast. Run it with `npm run test:real-engine`
// (scripts/test-real-engine.sh: builds the TypeScript, provisions the binary and the model, then runs this).
// Like the main config, tests are the tsc output in dist/; the same globalSetup provisions Envoy.
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');

module.exports = {
  rootDir: root,
  testEnvironment: '<rootDir>/dist/test/support/leak-environment.js',
  roots: ['<rootDir>/dist/test/real-engine'],
  testMatch: ['**/*.test.js'],
  globalSetup: '<rootDir>/dist/test/support/global-setup.js',
  // Model loads, kills and restarts of real servers; the first run may also build llama-server (~10+ min)
  // when REAL_ENGINE_BUILD=1 and nothing is cached.
  testTimeout: 10 * 60 * 1000,
  // One suite at a time: two llama-server replicas already use both cores.
  maxWorkers: 1,
  // Tells the suite it runs under this config: under the main jest.config.js (whose roots include
  // dist/test) it skips itself instead of slowing `npm test` down.
  globals: { __REAL_ENGINE_SUITE__: true },
};
