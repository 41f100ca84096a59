import { describe, expect, it } from 'vitest'
import { SingleFlight } from '../../../src/cache/single-flight.js'

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
    const got = await Promise.all(waiters.map((w) => (w.leader ? undefined : w.wait)))
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
})
