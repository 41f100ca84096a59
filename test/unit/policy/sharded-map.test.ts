import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Writes } from '../../../src/policy/copy-on-write.js'
import { hashOf, ShardedMap } from '../../../src/policy/sharded-map.js'

/**
 * The sharded map of the policy index (src/policy/sharded-map.ts) against a Map: the same entries,
 * the same answers for every key, through growth past many shards, and under a patch's
 * copy-on-write a map it copied from is left as it was.
 */

const SEED = Number(process.env.MCP_EDGE_SHARDS_SEED ?? 20261203)

/** Keys that collide as Map keys do (0 and -0, NaN) and strings long and short. */
const key = fc.oneof(
  fc.integer({ min: 0, max: 3000 }).map((n) => `t${n}_`),
  fc.string({ maxLength: 40 }),
  fc.constantFrom<unknown>(0, -0, NaN, 1, 1.5, -1, true, false, null, undefined, ''),
)
const op = fc.oneof(
  fc.tuple(fc.constant('set' as const), key, fc.integer()),
  fc.tuple(fc.constant('delete' as const), key, fc.constant(0)),
)

function same(m: ShardedMap<unknown, number>, ref: Map<unknown, number>, keys: unknown[]): void {
  expect(m.size).toBe(ref.size)
  expect(new Map(m)).toEqual(ref)
  for (const k of keys) {
    expect(m.get(k)).toBe(ref.get(k))
    expect(m.has(k)).toBe(ref.has(k))
  }
}

describe('ShardedMap', () => {
  it('holds what a Map holds, grown past many shards, and a copy leaves its source as it was', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2500 }),
        fc.array(op, { maxLength: 200 }),
        (start, ops) => {
          const built = new ShardedMap<unknown, number>()
          const ref = new Map<unknown, number>()
          for (let i = 0; i < start; i++) {
            built.set(`t${i}_`, i, Writes.BUILD)
            ref.set(`t${i}_`, i)
          }
          const keys = [...ref.keys(), ...ops.map(([, k]) => k)]
          same(built, ref, keys)
          const wasBuilt = new Map(built)
          // A patch: its own copy, changed shard by shard.
          const w = Writes.patch()
          let patched = built
          const after = new Map(ref)
          for (const [kind, k, v] of ops) {
            patched = w.own(patched, (m) => m.copy())
            if (kind === 'set') {
              patched.set(k, v, w)
              after.set(k, v)
            } else {
              patched.delete(k, w)
              after.delete(k)
            }
          }
          same(patched, after, keys)
          // SECURITY: the map the patch started from serves meanwhile: nothing of it changed.
          same(built, wasBuilt, keys)
        },
      ),
      { seed: SEED, numRuns: 60 },
    )
  })

  it('hashes keys a Map takes as one alike', () => {
    expect(hashOf(0)).toBe(hashOf(-0))
    expect(hashOf(NaN)).toBe(hashOf(NaN))
    const long = 'x'.repeat(1000)
    expect(hashOf(long)).toBe(hashOf(`${'x'.repeat(999)}x`))
  })

  it('refuses a change under a patch that did not copy it', () => {
    const m = new ShardedMap<string, number>()
    m.set('a', 1, Writes.BUILD)
    expect(() => m.set('b', 2, Writes.patch())).toThrow(/did not copy/)
    expect(() => m.delete('a', Writes.patch())).toThrow(/did not copy/)
    expect([...m]).toEqual([['a', 1]])
  })

  it('spreads a large map over shards of a few hundred entries, where a patch copies one', () => {
    const m = new ShardedMap<string, number>()
    for (let i = 0; i < 10_000; i++) m.set(`t${i}_`, i, Writes.BUILD)
    const w = Writes.patch()
    const mine = w.own(m, (x) => x.copy())
    mine.set('t5000_', -1, w)
    const shards = (x: ShardedMap<string, number>) =>
      (x as unknown as { shards: Map<string, number>[] }).shards
    const copied = shards(mine).filter((s, i) => s !== shards(m)[i])
    expect(shards(m).length).toBeGreaterThanOrEqual(32)
    expect(copied.length).toBe(1)
    expect(copied[0]?.size).toBeLessThanOrEqual(512)
    expect(Math.max(...shards(m).map((s) => s.size))).toBeLessThanOrEqual(512)
    expect(m.get('t5000_')).toBe(5000)
    expect(mine.get('t5000_')).toBe(-1)
  })
})
