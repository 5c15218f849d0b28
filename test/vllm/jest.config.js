// The vLLM suite: the family table's and the template sweep's vLLM cells through vLLM 0.33.0's own renderer and reasoning parsers
// (test/fidelity/vllm_harness.py, venv by scripts/vllm-deps.sh). A separate jest run, like the real-engine suite:
// its first run installs about 3 GB of wheels. Run it with `npm run test:vllm` (scripts/test-vllm.sh).
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');

module.exports = {
  rootDir: root,
  testEnvironment: '<rootDir>/dist/test/support/leak-environment.js',
  roots: ['<rootDir>/dist/test/vllm'],
  testMatch: ['**/*.test.js'],
  testTimeout: 30 * 60 * 1000,
  maxWorkers: 1,
};
