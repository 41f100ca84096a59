import { BaseSequencer, type TestSpecification } from 'vitest/node'

/**
 * Files that take far longer than the rest, mostly waiting (a 60 s load, worker processes, a
 * browser): started first so they overlap everything else instead of running alone at the end.
 * Vitest's own order (the last run's durations, else file size) decides the rest.
 */
const SLOW = [
  'test/integration/rate-limits-redis.test.ts',
  'test/integration/workers.test.ts',
  'test/integration/conformance.test.ts',
  'test/integration/status-page.test.ts',
  'test/integration/third-party-matrix.test.ts',
  'test/integration/deadlines.test.ts',
  'test/integration/demo.test.ts',
  'test/unit/policy/off-thread.test.ts',
]

/** Vitest's sequencer with the known slow files at the front. */
export class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const rank = (f: TestSpecification): number => {
      const i = SLOW.findIndex((s) => f.moduleId.endsWith(s))
      return i === -1 ? SLOW.length : i
    }
    return sorted
      .map((f, i) => ({ f, i }))
      .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
      .map((x) => x.f)
  }
}
