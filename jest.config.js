// Tests are compiled by tsc (npm test builds first) and run as plain JS: no transform step, the same
// code that ships is the code under test.
module.exports = {
  // Names the file that leaves a timer, socket or process referenced (see the file's header).
  testEnvironment: '<rootDir>/dist/test/support/leak-environment.js',
  roots: ['<rootDir>/dist/test'],
  testMatch: ['**/*.test.js'],
  // The real-engine suite (llama.cpp) has its own command and config: npm run test:real-engine.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/dist/test/real-engine/', '<rootDir>/dist/test/vllm/'],
  globalSetup: '<rootDir>/dist/test/support/global-setup.js',
  globalTeardown: '<rootDir>/dist/test/support/global-teardown.js',
  testTimeout: 60000,
  maxWorkers: 2,
};
