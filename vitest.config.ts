import { defineConfig } from 'vitest/config';

// Two cores on CI machines: two test files at a time, each with its own fresh database.
export default defineConfig({
  test: {
    // The merchant SDK's tests run against the service started in-process, like the service's own.
    include: ['test/**/*.test.ts', 'packages/sdk/test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
