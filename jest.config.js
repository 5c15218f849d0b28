// Tests are compiled by tsc (npm test builds first) and run as plain JS: no transform step, the same
// code that ships is the code under test.
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/dist/test'],
  testMatch: ['**/*.test.js'],
  globalSetup: '<rootDir>/dist/test/support/global-setup.js',
  testTimeout: 60000,
  maxWorkers: 2,
};
