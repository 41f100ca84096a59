import { describe, expect, it } from 'vitest'
import { Breaker } from '../../../src/redis/breaker.js'

describe('Breaker', () => {
  it('opens after N failures in a row, probes once per period, and doubles the period', () => {
    let now = 0
    const b = new Breaker({ failures: 3, openMs: 1000, maxOpenMs: 3000, now: () => now })
    expect(b.failedWith(false)).toBeUndefined()
    b.succeeded() // a success resets the count
    expect(b.failedWith(false)).toBeUndefined()
    expect(b.failedWith(false)).toBeUndefined()
    expect(b.allow()).toBe('pass')
    expect(b.failedWith(false)).toBe('opened')
    expect(b.allow()).toBeUndefined()
    // a straggler sent before the circuit opened does not extend it
    expect(b.failedWith(false)).toBeUndefined()
    now = 999
    expect(b.allow()).toBeUndefined()
    now = 1000
    expect(b.allow()).toBe('probe')
    expect(b.allow()).toBeUndefined() // one probe at a time
    expect(b.failedWith(true)).toBe('reopened')
    expect(b.openMs).toBe(2000)
    now = 3000
    expect(b.allow()).toBe('probe')
    expect(b.failedWith(true)).toBe('reopened')
    expect(b.openMs).toBe(3000) // capped
    now = 6000
    expect(b.allow()).toBe('probe')
    expect(b.succeeded()).toBe(true)
    expect(b.isOpen).toBe(false)
    expect(b.openMs).toBe(1000)
    expect(b.allow()).toBe('pass')
    expect(b.succeeded()).toBe(false)
  })
})
