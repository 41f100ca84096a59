import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // expect.poll is how tests wait for something asynchronous (a listen stream, a log line): a
    // short interval keeps waits short, a long timeout keeps a loaded CI machine from flaking.
    expect: { poll: { interval: 10, timeout: 10_000 } },
    // CI also writes test-results.json, from which .ci/run prints its closing "N passed" line.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results.json' },
  },
})
