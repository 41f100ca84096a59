import { defineConfig } from 'vitest/config'
import { SlowFirst } from './test/helpers/sequencer.js'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Most integration files wait on sockets, child processes and timers far more than they
    // compute, so on a 2-core machine three files at a time finish in about half the time of
    // vitest's default (cores - 1 = one file at a time) without starving each other of CPU.
    maxWorkers: 3,
    // A worker keeps the modules it imported for the next file instead of importing the whole
    // gateway again per file (that was most of the suite's CPU time). Tests share no module
    // state: every gateway, registry, cache and limiter is built per test.
    isolate: false,
    sequence: { sequencer: SlowFirst },
    // expect.poll is how tests wait for something asynchronous (a listen stream, a log line): a
    // short interval keeps waits short, a long timeout keeps a loaded CI machine from flaking.
    expect: { poll: { interval: 10, timeout: 10_000 } },
    // CI also writes test-results.json, from which .ci/run prints its closing "N passed" line.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results.json' },
  },
})
