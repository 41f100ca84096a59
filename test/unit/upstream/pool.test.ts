import { afterEach, describe, expect, it, vi } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { UpstreamPool, type BalanceMode } from '../../../src/upstream/pool.js'
import type { Upstream } from '../../../src/upstream/upstream.js'
import { replicaFactory, type ReplicaState as State } from '../../helpers/replica-fixtures.js'

// Selection rules, one table per rule (after caddy's selectionpolicies_test.go). The stream
// budget rows live in stream-budget.test.ts.

/** Replica `i` (URL port 9000+i, id `app#i`) with caps of 10 in the given state. */
const replica = replicaFactory(10, 10)
afterEach(() => {
  vi.restoreAllMocks()
})

function poolOf(
  states: readonly State[],
  mode: BalanceMode,
  weights: readonly number[] = states.map(() => 1),
): UpstreamPool {
  return new UpstreamPool(
    states.map((s, i) => replica(i, s)),
    weights,
    mode,
  )
}

/** The index of the replica picked, or the error code. */
function pickIndex(
  pool: UpstreamPool,
  opts: { exclude?: readonly number[]; key?: string; stream?: boolean } = {},
): number | string {
  const exclude = opts.exclude?.map((i) => pool.upstreams[i] as Upstream)
  try {
    return pool.upstreams.indexOf(pool.select(exclude, opts.key, opts.stream ?? false))
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

function sequence(pool: UpstreamPool, n: number, exclude?: readonly number[]): (number | string)[] {
  return Array.from({ length: n }, () => pickIndex(pool, exclude && { exclude }))
}

describe('UpstreamPool.select: smooth weighted round-robin', () => {
  it.each<[string, readonly number[], readonly number[]]>([
    ['equal weights take turns', [1, 1, 1], [0, 1, 2, 0, 1, 2]],
    ['weight 2 goes twice per window of 3', [2, 1], [0, 1, 0, 0, 1, 0]],
    // nginx's worked example (ngx_http_upstream_get_peer): a a b a c a a, never a burst of 5.
    ['5:1:1 interleaves instead of bursting', [5, 1, 1], [0, 0, 1, 0, 2, 0, 0]],
    ['a heavy replica last in the list', [1, 3], [1, 0, 1, 1, 1, 0, 1, 1]],
  ])('%s', (_label, weights, want) => {
    const pool = poolOf(
      weights.map(() => ({})),
      'round-robin',
      weights,
    )
    expect(sequence(pool, want.length)).toEqual(want)
  })

  it.each<[string, readonly State[], readonly number[], readonly number[]]>([
    ['skips a replica that is down', [{}, { down: true }, {}], [1, 1, 1], [0, 2, 0, 2]],
    ['skips an ejected replica', [{ ejected: true }, {}, {}], [1, 1, 1], [1, 2, 1, 2]],
    ['skips a full replica', [{}, { inFlight: 10 }, {}], [1, 1, 1], [0, 2, 0, 2]],
    ['weights still hold among the rest', [{ down: true }, {}, {}], [9, 2, 1], [1, 2, 1, 1, 2, 1]],
  ])('%s', (_label, states, weights, want) => {
    expect(sequence(poolOf(states, 'round-robin', weights), want.length)).toEqual(want)
  })

  it('honours weights exactly over every window of sum(w) picks', () => {
    const weights = [3, 2, 1, 4]
    const pool = poolOf(
      weights.map(() => ({})),
      'round-robin',
      weights,
    )
    for (let window = 0; window < 5; window++) {
      const counts = [0, 0, 0, 0]
      for (const i of sequence(pool, 10)) counts[i as number]!++
      expect(counts).toEqual(weights)
    }
  })

  it('leaves an excluded replica out (a retry goes elsewhere)', () => {
    const pool = poolOf([{}, {}, {}], 'round-robin')
    expect(sequence(pool, 4, [1])).toEqual([0, 2, 0, 2])
  })
})

describe('UpstreamPool.select: power of two choices, least request', () => {
  // With two candidates both are always compared, so the pick does not depend on the dice.
  it.each<[string, readonly State[], readonly number[], boolean, number]>([
    ['the less loaded of two', [{ inFlight: 3 }, { inFlight: 1 }], [1, 1], false, 1],
    ['the less loaded of two, either order', [{ inFlight: 1 }, { inFlight: 3 }], [1, 1], false, 0],
    // (3+1)/4 = 1 against (1+1)/1 = 2: the weight-4 replica has more room left.
    ['load is scaled by weight', [{ inFlight: 3 }, { inFlight: 1 }], [4, 1], false, 0],
    ['streams do not count as request load', [{ streams: 5 }, { inFlight: 1 }], [1, 1], false, 0],
    ['a stream compares open streams', [{ streams: 3 }, { inFlight: 5 }], [1, 1], true, 1],
    ['a stream: streams scaled by weight', [{ streams: 3 }, { streams: 1 }], [4, 1], true, 0],
    ['a full replica is not a choice', [{ inFlight: 10 }, { inFlight: 9 }], [1, 1], false, 1],
  ])('%s', (_label, states, weights, stream, want) => {
    const pool = poolOf(states, 'least-request', weights)
    for (let i = 0; i < 20; i++) expect(pickIndex(pool, { stream })).toBe(want)
  })

  it.each<[string, readonly number[], number, number]>([
    // Math.random() → first index floor(r·n); second floor(r·(n-1)), bumped past the first.
    ['dice 0,0 compare replicas 0 and 1', [0, 0], 3, 1],
    ['dice 0.99,0.99 compare replicas 2 and 1', [0.99, 0.99], 3, 2],
    ['dice 0.5,0.4 compare replicas 1 and 0', [0.5, 0.4], 3, 1],
    ['dice 0.5,0.6 compare replicas 1 and 2', [0.5, 0.6], 3, 2],
  ])('%s', (_label, dice, n, want) => {
    // Loads 2, 1, 0: of any two, the higher index wins, so the pair compared shows in the result.
    const states = Array.from({ length: n }, (_, i) => ({ inFlight: n - 1 - i }))
    const pool = poolOf(states, 'least-request')
    const random = vi.spyOn(Math, 'random')
    for (const d of dice) random.mockReturnValueOnce(d)
    expect(pickIndex(pool)).toBe(want)
  })

  it('never picks the most loaded of three, and never compares a replica with itself', () => {
    const pool = poolOf([{ inFlight: 1 }, { inFlight: 9 }, { inFlight: 2 }], 'least-request')
    const seen = new Set<number | string>()
    for (let i = 0; i < 300; i++) seen.add(pickIndex(pool))
    // 0 beats both others; 2 wins only when paired with 1. A self-pairing would let 1 through.
    expect([...seen].sort()).toEqual([0, 2])
  })

  it('falls back to least-request in hash mode when the request has no key', () => {
    const pool = poolOf([{ inFlight: 4 }, { inFlight: 0 }], 'hash')
    for (let i = 0; i < 20; i++) expect(pickIndex(pool)).toBe(1)
  })
})

describe('UpstreamPool.select: rendezvous hashing', () => {
  const KEYS = Array.from({ length: 400 }, (_, i) => `user-${i}`)
  const picks = (pool: UpstreamPool, exclude?: readonly number[]) =>
    KEYS.map((key) => pickIndex(pool, { key, ...(exclude && { exclude }) }))

  it('sends a key to the same replica every time, whatever the load', () => {
    const pool = poolOf([{}, {}, {}], 'hash')
    const first = picks(pool)
    pool.upstreams[0]!.inFlight = 9
    expect(picks(pool)).toEqual(first)
    expect(new Set(first)).toEqual(new Set([0, 1, 2]))
  })

  it('agrees across pools listing the same replicas in another order (seeds come from URLs)', () => {
    const a = new UpstreamPool([replica(0), replica(1), replica(2)], [1, 1, 1], 'hash')
    const b = new UpstreamPool([replica(2), replica(0), replica(1)], [1, 1, 1], 'hash')
    for (const key of KEYS)
      expect(a.select(undefined, key, false).id).toBe(b.select(undefined, key, false).id)
  })

  it.each<[string, State, readonly number[] | undefined]>([
    ['excluded', {}, [1]],
    ['down', { down: true }, undefined],
    ['ejected', { ejected: true }, undefined],
    ['full', { inFlight: 10 }, undefined],
  ])('when a replica is %s, only its own keys move', (_label, state, exclude) => {
    const before = picks(poolOf([{}, {}, {}], 'hash'))
    const after = picks(poolOf([{}, state, {}], 'hash'), exclude)
    for (let k = 0; k < KEYS.length; k++) {
      if (before[k] === 1) expect(after[k]).not.toBe(1)
      else expect(after[k]).toBe(before[k])
    }
  })

  it('gives each replica a share of keys proportional to its weight', () => {
    const keys = Array.from({ length: 4000 }, (_, i) => `tenant-${i}`)
    const pool = poolOf([{}, {}, {}], 'hash', [1, 2, 5])
    const counts = [0, 0, 0]
    for (const key of keys) counts[pickIndex(pool, { key }) as number]!++
    // Expected 500, 1000, 2500; ±15 % is far outside the binomial spread (σ ≈ 20…30).
    expect(counts[0]).toBeGreaterThan(425)
    expect(counts[0]).toBeLessThan(575)
    expect(counts[1]).toBeGreaterThan(850)
    expect(counts[1]).toBeLessThan(1150)
    expect(counts[2]).toBeGreaterThan(2125)
    expect(counts[2]).toBeLessThan(2875)
  })
})

describe('UpstreamPool.select: availability and panic mode', () => {
  it.each<[string, readonly State[], readonly number[], number | string, string | undefined]>([
    ['every replica excluded', [{}, {}], [0, 1], 'no_upstream', undefined],
    [
      'every replica down',
      [{ down: true }, { down: true }],
      [],
      'no_upstream',
      'all replicas down',
    ],
    [
      'the rest down, the tried one excluded',
      [{}, { down: true }],
      [0],
      'no_upstream',
      'all replicas down',
    ],
    [
      'healthy ones full: no panic, overloaded',
      [{ inFlight: 10 }, { ejected: true }],
      [],
      'overloaded',
      undefined,
    ],
    [
      'panic: only ejected left, tried anyway',
      [{ down: true }, { ejected: true, inFlight: 3 }],
      [],
      1,
      undefined,
    ],
    [
      'panic: never a down replica',
      [
        { down: true, ejected: true },
        { ejected: true, inFlight: 3 },
      ],
      [],
      1,
      undefined,
    ],
    ['panic: ejected replica excluded', [{ ejected: true }, { ejected: true }], [0], 1, undefined],
    ['panic: ejected and full', [{ ejected: true, inFlight: 10 }], [], 'overloaded', undefined],
    ['a lone healthy replica beats an ejected one', [{ ejected: true }, {}], [], 1, undefined],
  ])('%s', (_label, states, exclude, want, detail) => {
    const pool = poolOf(states, 'least-request')
    expect(pickIndex(pool, { exclude })).toBe(want)
    if (typeof want === 'string') {
      const ex = exclude.map((i) => pool.upstreams[i] as Upstream)
      expect(() => pool.select(ex, undefined, false)).toThrow(
        expect.objectContaining({ code: want, detail }),
      )
    }
  })

  it.each<BalanceMode>(['round-robin', 'least-request', 'hash'])(
    '%s: a panic pick still spreads over the ejected replicas',
    (mode) => {
      const pool = poolOf([{ ejected: true }, { ejected: true }], mode)
      const seen = new Set<number | string>()
      for (let i = 0; i < 200; i++) seen.add(pickIndex(pool, { key: `k${i}` }))
      expect([...seen].sort()).toEqual([0, 1])
    },
  )
})
