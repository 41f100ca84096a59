import { describe, expect, it } from 'vitest'
import { gcra, rateOf, type GcraResult } from '../../../src/limits/gcra.js'
import { RateTable, SlotTable, decideLocal } from '../../../src/limits/local.js'

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

describe('decideLocal', () => {
  it('counts several limits all or nothing', () => {
    const wide = { table: new RateTable(100), key: 'wide', rate: rateOf(10, 1000, 10) }
    const narrow = { table: new RateTable(100), key: 'narrow', rate: rateOf(1, 1000, 1) }
    expect(decideLocal([wide, narrow], 0).map((r) => r.allowed)).toEqual([true, true])
    expect(decideLocal([wide, narrow], 0).map((r) => r.allowed)).toEqual([true, false])
    // The refused request did not count against `wide`: 9 remain of its burst, minus this one.
    expect(decideLocal([wide], 0)[0]?.remaining).toBe(8)
    expect(decideLocal([wide, narrow], 1000).map((r) => r.allowed)).toEqual([true, true])
  })

  it('never drops a bucket that is not idle: a full table refuses the new key instead', () => {
    const table = new RateTable(2)
    const rate = rateOf(1, 60_000, 1) // one a minute
    const at = (key: string, now: number) => decideLocal([{ table, key, rate }], now)[0]
    expect(at('alice', 0)).toMatchObject({ allowed: true, full: false })
    expect(at('bob', 0)).toMatchObject({ allowed: true, full: false })
    // A third caller finds no room: refused, and alice and bob keep their state.
    const refused = at('mallory', 10)
    expect(refused).toMatchObject({ allowed: false, full: true, remaining: 0 })
    // Room again once a bucket is idle (at 60 s) and a search is allowed (1 s after the last).
    expect(refused?.retryAfterMs).toBe(60_000 - 10)
    expect(at('alice', 20)).toMatchObject({ allowed: false, full: false })
    expect(at('bob', 20)).toMatchObject({ allowed: false, full: false })
    expect(table.size).toBe(2)
  })

  it('makes room by dropping idle buckets only, and searches a full table at most once a second', () => {
    const table = new RateTable(1)
    const rate = rateOf(1, 100, 1) // a bucket is idle 100 ms after its request
    const at = (key: string, now: number) => decideLocal([{ table, key, rate }], now)[0]
    expect(at('a', 0)?.allowed).toBe(true)
    // Before 100 ms no bucket can be idle: refused without a search.
    expect(at('b', 50)).toMatchObject({ allowed: false, full: true, retryAfterMs: 50 })
    expect(at('a', 100)?.allowed).toBe(true) // `a` again: busy until 200 ms
    // Searched at 150 ms: nothing idle. `a` is idle at 200 ms, but no search before 1150 ms.
    expect(at('b', 150)).toMatchObject({ allowed: false, full: true })
    expect(at('b', 300)).toMatchObject({ allowed: false, full: true, retryAfterMs: 850 })
    expect(at('b', 1150)).toMatchObject({ allowed: true, full: false })
    expect(table.size).toBe(1)
    // `a` was idle when dropped: it starts from a fresh bucket, which is what it had anyway.
    expect(table.get('a')).toBeUndefined()
  })

  it('a known key is never refused for room, idle or not', () => {
    const table = new RateTable(1)
    const rate = rateOf(10, 1000, 10)
    expect(decideLocal([{ table, key: 'a', rate }], 0)[0]?.allowed).toBe(true)
    expect(decideLocal([{ table, key: 'a', rate }], 5000)[0]?.remaining).toBe(9)
  })

  it('forgets the tables of a limit only when nothing in them differs from fresh', () => {
    const table = new RateTable(4)
    decideLocal([{ table, key: 'a', rate: rateOf(1, 1000, 1) }], 0)
    expect(table.idle(500)).toBe(false)
    expect(table.idle(1000)).toBe(true)
    expect(table.size).toBe(0)
  })
})

describe('SlotTable', () => {
  it('holds at most max per key and gives a slot back exactly once', () => {
    const c = new SlotTable(100)
    const a = c.acquire('k', 2)
    const b = c.acquire('k', 2)
    expect(typeof a).toBe('function')
    expect(typeof b).toBe('function')
    expect(c.acquire('k', 2)).toBe('at_limit')
    const other = c.acquire('other', 2)
    expect(typeof other).toBe('function')
    if (typeof a !== 'function' || typeof b !== 'function') throw new Error('no slot')
    a()
    a() // twice: still only one slot back
    expect(c.held('k')).toBe(1)
    const again = c.acquire('k', 2)
    expect(typeof again).toBe('function')
    expect(c.acquire('k', 2)).toBe('at_limit')
    b()
    if (typeof again === 'function') again()
    expect(c.held('k')).toBe(0)
  })

  it('refuses a new key when every entry holds slots, and takes it once one is given back', () => {
    const c = new SlotTable(1)
    const a = c.acquire('a', 5)
    expect(c.acquire('b', 5)).toBe('table_full')
    // The key already held still gets its own slots.
    expect(typeof c.acquire('a', 5)).toBe('function')
    if (typeof a === 'function') a()
    expect(c.size).toBe(1)
  })
})
