import { describe, expect, it } from 'vitest'
import { gcra, rateOf, type GcraResult } from '../../../src/limits/gcra.js'
import { Concurrency, LocalRates } from '../../../src/limits/local.js'

/** Runs requests at the given times (ms) against one key; returns which passed. */
function run(rate: ReturnType<typeof rateOf>, times: readonly number[]): GcraResult[] {
  let tat: number | undefined
  return times.map((t) => {
    const r = gcra(rate, tat, t)
    if (r.allowed) tat = r.tat
    return r
  })
}

describe('GCRA', () => {
  it.each([
    // [label, count, periodMs, burst, request times, expected pass pattern]
    ['burst at once, then refused', 60, 60_000, 3, [0, 0, 0, 0], [1, 1, 1, 0]],
    [
      'one more after exactly one interval',
      60,
      60_000,
      3,
      [0, 0, 0, 0, 999, 1000],
      [1, 1, 1, 0, 0, 1],
    ],
    ['burst 1 is one per interval', 10, 1000, 1, [0, 50, 99, 100, 150, 200], [1, 0, 0, 1, 0, 1]],
    [
      '7/second: the 7th request of a full second passes',
      7,
      1000,
      7,
      [0, 0, 0, 0, 0, 0, 0, 0],
      [1, 1, 1, 1, 1, 1, 1, 0],
    ],
    [
      'idle key refills the whole burst',
      2,
      1000,
      2,
      [0, 0, 0, 5000, 5000, 5000],
      [1, 1, 0, 1, 1, 0],
    ],
    ['one day', 1, 86_400_000, 1, [0, 86_399_999, 86_400_000], [1, 0, 1]],
  ] as const)('%s', (_label, count, periodMs, burst, times, expected) => {
    const results = run(rateOf(count, periodMs, burst), times)
    expect(results.map((r) => (r.allowed ? 1 : 0))).toEqual(expected)
  })

  it('reports remaining, retry-after and reset to the millisecond', () => {
    const rate = rateOf(120, 60_000, 20) // T = 500 ms, capacity 10 s
    const first = gcra(rate, undefined, 1000)
    expect(first).toMatchObject({ allowed: true, remaining: 19, retryAfterMs: 0, resetMs: 500 })
    // After 20 at once the next one is 500 ms away.
    let tat: number | undefined
    for (let i = 0; i < 20; i++) tat = gcra(rate, tat, 1000).tat
    const refused = gcra(rate, tat, 1000)
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 500 })
    expect(refused.resetMs).toBe(10_000)
    const later = gcra(rate, tat, 1500)
    expect(later).toMatchObject({ allowed: true, remaining: 0 })
  })

  it('holds the rate over a long run (no drift)', () => {
    const rate = rateOf(100, 60_000, 10)
    let tat: number | undefined
    let passed = 0
    // A request every ms for ten minutes: 10 of burst + 100 per minute.
    for (let t = 0; t < 600_000; t++) {
      const r = gcra(rate, tat, t)
      if (r.allowed) {
        tat = r.tat
        passed++
      }
    }
    expect(passed).toBe(10 + 1000 - 1)
  })

  it('splits a rate and its burst between replicas', () => {
    expect(rateOf(120, 60_000, 20, 2)).toEqual({ intervalMs: 1000, burst: 10 })
    expect(rateOf(120, 60_000, 1, 4)).toEqual({ intervalMs: 2000, burst: 1 })
  })
})

describe('LocalRates', () => {
  it('counts several limits all or nothing', () => {
    let now = 0
    const local = new LocalRates(1 << 20, () => now)
    const wide = { key: 'wide', rate: rateOf(10, 1000, 10) }
    const narrow = { key: 'narrow', rate: rateOf(1, 1000, 1) }
    expect(local.decide([wide, narrow]).map((r) => r.allowed)).toEqual([true, true])
    expect(local.decide([wide, narrow]).map((r) => r.allowed)).toEqual([true, false])
    // The refused request did not count against `wide`: 9 remain of its burst, minus this one.
    expect(local.decide([wide])[0]?.remaining).toBe(8)
    now = 1000
    expect(local.decide([wide, narrow]).map((r) => r.allowed)).toEqual([true, true])
  })

  it('stays within its memory bound, dropping the least recently used keys', () => {
    const now = 0
    const local = new LocalRates(64 * 1024, () => now)
    for (let i = 0; i < 10_000; i++) local.decide([{ key: `k${i}`, rate: rateOf(1, 1000, 1) }])
    expect(local.size).toBeLessThan(1000)
    expect(local.size).toBeGreaterThan(100)
  })

  it('forgets a key once it is idle (no timers: on the injected clock)', () => {
    let now = 0
    const local = new LocalRates(1 << 20, () => now)
    local.decide([{ key: 'a', rate: rateOf(1, 1000, 1) }])
    expect(local.size).toBe(1)
    now = 2000
    local.decide([{ key: 'b', rate: rateOf(1, 1000, 1) }])
    // `a` is past its TAT: reading it finds nothing, which is what a stored past TAT means anyway.
    expect(local.decide([{ key: 'a', rate: rateOf(1, 1000, 1) }])[0]?.remaining).toBe(0)
  })
})

describe('Concurrency', () => {
  it('holds at most max per key and gives a slot back exactly once', () => {
    const c = new Concurrency()
    const a = c.acquire('k', 2)
    const b = c.acquire('k', 2)
    expect(a).toBeDefined()
    expect(b).toBeDefined()
    expect(c.acquire('k', 2)).toBeUndefined()
    expect(c.acquire('other', 2)).toBeDefined()
    a?.()
    a?.() // twice: still only one slot back
    expect(c.held('k')).toBe(1)
    const again = c.acquire('k', 2)
    expect(again).toBeDefined()
    expect(c.acquire('k', 2)).toBeUndefined()
    b?.()
    again?.()
    expect(c.held('k')).toBe(0)
  })
})
