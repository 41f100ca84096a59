import { afterEach, describe, expect, it, vi } from 'vitest'
import { backoffMs, RETRY_STATUSES, RetryBudget } from '../../../src/upstream/retry.js'

afterEach(() => {
  vi.restoreAllMocks()
})

const settings = (budgetPercent: number, minConcurrent: number) => ({
  attempts: 2,
  budgetPercent,
  minConcurrent,
  backoffBaseMs: 25,
})

describe('RetryBudget: retries in progress ≤ max(minConcurrent, budgetPercent % of requests)', () => {
  it.each<[string, number, number, number, number, boolean]>([
    // label, budgetPercent, minConcurrent, requests in the loop, retries in progress, granted
    ['idle server: minConcurrent allows one', 20, 1, 0, 0, true],
    ['minConcurrent used up on a quiet server', 20, 1, 4, 1, false],
    ['minConcurrent 3 allows a third', 20, 3, 1, 2, true],
    ['minConcurrent 3 refuses a fourth', 20, 3, 1, 3, false],
    ['20 % of 50 requests is 10: the tenth', 20, 1, 50, 9, true],
    ['20 % of 50 requests is 10: not an eleventh', 20, 1, 50, 10, false],
    ['the percentage is floored: 20 % of 14 is 2', 20, 1, 14, 2, false],
    ['the percentage is floored: 20 % of 15 is 3', 20, 1, 15, 2, true],
    ['budget 0 %: only minConcurrent', 0, 2, 1000, 2, false],
    ['budget 100 %: every request may retry once', 100, 0, 5, 4, true],
    ['minConcurrent 0 and no requests: none', 100, 0, 0, 0, false],
  ])('%s', (_label, percent, min, active, retrying, want) => {
    const budget = new RetryBudget(settings(percent, min))
    budget.active = active
    budget.retrying = retrying
    expect(budget.tryAcquire()).toBe(want)
    expect(budget.retrying).toBe(want ? retrying + 1 : retrying)
  })

  it('gives a token back on release(), so the next retry fits again', () => {
    const budget = new RetryBudget(settings(20, 2))
    budget.active = 3
    expect([budget.tryAcquire(), budget.tryAcquire(), budget.tryAcquire()]).toEqual([
      true,
      true,
      false,
    ])
    budget.release()
    expect(budget.retrying).toBe(1)
    expect(budget.tryAcquire()).toBe(true)
    expect(budget.tryAcquire()).toBe(false)
  })
})

describe('backoffMs: full jitter, uniform in [0, base·2^(retry-1)]', () => {
  it.each<[number, number, number, number]>([
    // base, retry, Math.random(), wait
    [25, 1, 0, 0],
    [25, 1, 0.5, 12.5],
    [25, 1, 0.999, 24.975],
    [25, 2, 0.999, 49.95],
    [25, 3, 0.5, 50],
    [25, 4, 0.25, 50],
    [100, 2, 0.5, 100],
    [0, 3, 0.9, 0],
  ])('base %i, retry %i, dice %d → %d ms', (base, retry, dice, want) => {
    vi.spyOn(Math, 'random').mockReturnValue(dice)
    expect(backoffMs(base, retry)).toBeCloseTo(want, 9)
  })

  it.each([1, 2, 3, 5])('retry %i: every wait within its bounds, and the range used', (retry) => {
    const cap = 25 * 2 ** (retry - 1)
    const waits = Array.from({ length: 500 }, () => backoffMs(25, retry))
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(0)
    expect(Math.max(...waits)).toBeLessThan(cap)
    // Jitter, not a fixed step: the waits cover the lower and upper quarter of the range.
    expect(waits.some((w) => w < cap / 4)).toBe(true)
    expect(waits.some((w) => w > (cap * 3) / 4)).toBe(true)
  })
})

describe('RETRY_STATUSES: answers that mean "try elsewhere" when they carry no JSON-RPC body', () => {
  it.each<[number, boolean]>([
    [502, true],
    [503, true],
    [504, true],
    // A 500 is an answer the backend meant to send; 4xx are the request's fault.
    [500, false],
    [501, false],
    [505, false],
    [429, false],
    [408, false],
    [404, false],
    [200, false],
  ])('%i → %s', (status, want) => {
    expect(RETRY_STATUSES.has(status)).toBe(want)
  })
})
