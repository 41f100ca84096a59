import { describe, expect, it, vi } from 'vitest'
import { SingleFlight, TIMED_OUT } from '../../../src/cache/single-flight.js'

describe('SingleFlight', () => {
  it('makes the first caller the leader and hands its outcome to every waiter', async () => {
    const sf = new SingleFlight<string>()
    const lead = sf.begin('k')
    const waiters = Array.from({ length: 5 }, () => sf.begin('k'))
    expect(lead.leader).toBe(true)
    expect(waiters.every((w) => !w.leader)).toBe(true)
    if (!lead.leader) throw new Error('unreachable')
    expect(sf.waiters).toBe(5)
    lead.settle('v')
    expect(sf.waiters).toBe(0)
    lead.settle('ignored')
    const got = await Promise.all(waiters.map((w) => (w.leader ? undefined : w.wait(1000))))
    expect(got).toEqual(['v', 'v', 'v', 'v', 'v'])
    expect(sf.size).toBe(0)
    expect(sf.begin('k').leader).toBe(true) // a settled flight is gone
  })

  it('keeps keys apart', () => {
    const sf = new SingleFlight<string>()
    expect(sf.begin('a').leader).toBe(true)
    expect(sf.begin('b').leader).toBe(true)
    expect(sf.begin('a').leader).toBe(false)
  })

  it('times each waiter out on its own deadline, and the others still get the outcome', async () => {
    vi.useFakeTimers()
    try {
      const sf = new SingleFlight<string>()
      const lead = sf.begin('k')
      const quick = sf.begin('k')
      const patient = sf.begin('k')
      if (!lead.leader || quick.leader || patient.leader) throw new Error('unreachable')
      const a = quick.wait(100)
      const b = patient.wait(10_000)
      await vi.advanceTimersByTimeAsync(100)
      expect(await a).toBe(TIMED_OUT)
      expect(sf.waiters).toBe(1)
      lead.settle('v')
      expect(await b).toBe('v')
      expect(sf.waiters).toBe(0)
      expect(vi.getTimerCount()).toBe(0) // the settled waiter's timer is cleared
    } finally {
      vi.useRealTimers()
    }
  })
})
