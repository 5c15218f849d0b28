// Which jest runs provision the Docker engine (test/support/docker-engine.ts): a run that names test paths
// starts no engine unless one of them is a container test file.
import { runIncludesContainerTests } from '../../support/docker-engine';

describe('runIncludesContainerTests', () => {
  test('a run without test paths (npm test) includes them', () => {
    expect(runIncludesContainerTests([])).toBe(true);
  });

  test('a run naming a container test file, or the directory that holds them, includes them', () => {
    expect(runIncludesContainerTests(['dist/test/e2e/compose.testcontainers.test.js'])).toBe(true);
    expect(runIncludesContainerTests(['dist/test/unit/x.test.js', 'pod.docker'])).toBe(true);
    expect(runIncludesContainerTests(['dist/test/e2e'])).toBe(true);
    expect(runIncludesContainerTests(['test/'])).toBe(true);
  });

  test('a run naming other files starts nothing', () => {
    expect(runIncludesContainerTests(['dist/test/unit/code-shape.test.js'])).toBe(false);
    expect(runIncludesContainerTests(['dist/test/e2e/compose.emulated.test.js', 'dist/test/e2e/pod.emulated.test.js'])).toBe(false);
  });
});
