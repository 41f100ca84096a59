import { describe, expect, it } from 'vitest'
import { hashKey, rendezvousScore, replicaSeed } from '../../../src/upstream/hashing.js'

/** Number of differing bits between two 32-bit values. */
function bitsApart(a: number, b: number): number {
  let x = (a ^ b) >>> 0
  let n = 0
  while (x !== 0) {
    n += x & 1
    x >>>= 1
  }
  return n
}

/** The winner among `seeds` with `weights` for `key`, as UpstreamPool's rendezvous picks it. */
function winner(key: string, seeds: readonly number[], weights: readonly number[]): number {
  const h = hashKey(key)
  let best = -1
  let bestScore = -1
  seeds.forEach((seed, i) => {
    const score = rendezvousScore(h, seed, weights[i] as number)
    if (score > bestScore) {
      bestScore = score
      best = i
    }
  })
  return best
}

const URLS = ['http://10.0.0.1:8080/mcp', 'http://10.0.0.2:8080/mcp', 'http://10.0.0.3:8080/mcp']
const KEYS = Array.from({ length: 6000 }, (_, i) => `user-${i}`)

describe('hashKey: stable across processes and releases', () => {
  // Gateways in a fleet, and a gateway before and after an upgrade, must send a key to the same
  // replica: these values may only change together with a note in docs/balancing.md.
  it.each<[string, number]>([
    ['', 0xab3e7c0b],
    ['a', 0x1a80b1b3],
    ['user-1', 0x778f8aec],
    ['tenant:acme', 0xb6786d2f],
  ])('hashKey(%j) = %i', (key, want) => {
    expect(hashKey(key)).toBe(want)
  })

  it('is an unsigned 32-bit integer', () => {
    for (const key of KEYS.slice(0, 200)) {
      const h = hashKey(key)
      expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true)
    }
  })

  it.each<[string, string]>([
    ['user-1', 'user-2'],
    ['a', 'b'],
    ['tenant-10', 'tenant-11'],
    ['é', 'e'],
  ])('spreads nearby keys (%j, %j) far apart (avalanche)', (a, b) => {
    expect(bitsApart(hashKey(a), hashKey(b))).toBeGreaterThanOrEqual(8)
  })

  it('seeds replicas from their URL, not their position', () => {
    expect(replicaSeed(URLS[0] as string)).toBe(replicaSeed('http://10.0.0.1:8080/mcp'))
    expect(replicaSeed(URLS[0] as string)).not.toBe(replicaSeed(URLS[1] as string))
    expect(replicaSeed(URLS[0] as string)).not.toBe(hashKey(URLS[0] as string))
  })
})

describe('rendezvousScore: weighted highest-random-weight', () => {
  it('is positive and grows with the weight for the same key and replica', () => {
    const h = hashKey('k')
    const s = replicaSeed(URLS[0] as string)
    const scores = [1, 2, 5, 100].map((w) => rendezvousScore(h, s, w))
    for (const x of scores) expect(x).toBeGreaterThan(0)
    expect([...scores].sort((a, b) => a - b)).toEqual(scores)
    expect(scores[1]).toBeCloseTo(2 * (scores[0] as number), 9)
  })

  it('stays finite at the ends of the 32-bit range', () => {
    for (const h of [0, 0xffffffff])
      for (const s of [0, 0xffffffff]) expect(Number.isFinite(rendezvousScore(h, s, 1))).toBe(true)
  })

  it.each<[string, readonly number[]]>([
    ['equal weights', [1, 1, 1]],
    ['1:2:3', [1, 2, 3]],
    ['1:1:8', [1, 1, 8]],
  ])('gives each replica its weight’s share of keys (%s)', (_label, weights) => {
    const seeds = URLS.map(replicaSeed)
    const counts = [0, 0, 0]
    for (const key of KEYS) counts[winner(key, seeds, weights)]!++
    const total = weights.reduce((a, b) => a + b, 0)
    weights.forEach((w, i) => {
      const want = (KEYS.length * w) / total
      // ±12 % of the expected share; the binomial spread is 2…4 % here.
      expect(Math.abs((counts[i] as number) - want) / want).toBeLessThan(0.12)
    })
  })

  it('moves only the keys of a replica that leaves, and spreads them over the rest', () => {
    const seeds = URLS.map(replicaSeed)
    const before = KEYS.map((k) => winner(k, seeds, [1, 1, 1]))
    const after = KEYS.map((k) => winner(k, seeds.slice(1), [1, 1]) + 1)
    const moved = [0, 0, 0]
    let strayed = 0
    KEYS.forEach((_, i) => {
      if (before[i] === 0) moved[after[i] as number]!++
      else if (after[i] !== before[i]) strayed++
    })
    expect(strayed).toBe(0)
    expect(moved[1]).toBeGreaterThan(KEYS.length / 3 / 2 - 250)
    expect(moved[2]).toBeGreaterThan(KEYS.length / 3 / 2 - 250)
  })

  it('moves only keys towards a replica whose weight grows', () => {
    const seeds = URLS.map(replicaSeed)
    const before = KEYS.map((k) => winner(k, seeds, [1, 1, 1]))
    const after = KEYS.map((k) => winner(k, seeds, [1, 1, 2]))
    let moved = 0
    let strayed = 0
    KEYS.forEach((_, i) => {
      if (after[i] === before[i]) return
      moved++
      if (after[i] !== 2) strayed++
    })
    expect(strayed).toBe(0)
    // From 1/3 to 1/2 of the keys: about a sixth of them move.
    expect(moved).toBeGreaterThan(KEYS.length / 6 - 300)
    expect(moved).toBeLessThan(KEYS.length / 6 + 300)
  })
})
