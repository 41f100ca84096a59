import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../../src/observability/metrics.js'
import { readMetrics, type Reading } from '../../../src/status/reading.js'
import {
  delta,
  history,
  quantileMs,
  ReadingRing,
  SAMPLE_MS,
  trafficBetween,
} from '../../../src/status/windows.js'

/** A registry with `calls` requests of `seconds` each recorded on server `app`. */
async function readingAfter(
  metrics: ReturnType<typeof createMetrics>,
  at: number,
): Promise<Reading> {
  return readMetrics(await metrics.registry.getMetricsAsJSON(), at)
}

describe('quantileMs', () => {
  const bounds = [0.01, 0.1, 1, Infinity]
  it('interpolates within the bucket the rank falls in, as histogram_quantile does', () => {
    // 10 requests ≤ 10 ms, 10 more ≤ 100 ms: the median is the top of the first bucket.
    expect(quantileMs([10, 20, 20, 20], bounds, 0.5)).toBeCloseTo(10)
    expect(quantileMs([10, 20, 20, 20], bounds, 0.75)).toBeCloseTo(55)
  })
  it('gives the highest finite bound for a rank in the +Inf bucket, and null without requests', () => {
    expect(quantileMs([0, 0, 0, 4], bounds, 0.95)).toBe(1000)
    expect(quantileMs([0, 0, 0, 0], bounds, 0.5)).toBeNull()
  })
})

describe('delta', () => {
  it('is the increase, or the new value when the counter went back (a worker restarted)', () => {
    expect(delta(15, 10)).toBe(5)
    expect(delta(3, 10)).toBe(3)
    expect(delta(undefined, 4)).toBe(0)
  })
})

describe('traffic windows from the registry', () => {
  it('counts requests, rate, error share, outcomes and latency between two readings', async () => {
    const metrics = createMetrics(false)
    const start = 1_000_000
    const ring = new ReadingRing(start)
    for (let i = 0; i < 8; i++) metrics.requests.record('app', 'tools/call', 'ok', 200, 0.004)
    metrics.requests.record('app', 'tools/call', 'policy_denied', 200, 0.001)
    metrics.requests.record('app', 'tools/call', 'rate_limited', 429, 0.001)
    const now = await readingAfter(metrics, start + 10_000)
    ring.add(now)
    const w = trafficBetween(ring.baseline(now.at, 60_000), now, 'app')
    expect(w).toMatchObject({ seconds: 10, requests: 10, rps: 1, errorShare: 0.1 })
    expect(w.outcomes).toEqual({ policy_denied: 0.1, rate_limited: 0.1 })
    expect(w.p50Ms).toBeGreaterThan(2.5)
    expect(w.p50Ms).toBeLessThanOrEqual(5)
    expect(trafficBetween(now, now, 'other')).toMatchObject({ requests: 0, errorShare: null })
  })

  it('keeps one reading per sample for 15 minutes, whatever the rate readings are taken at', async () => {
    const metrics = createMetrics(false)
    const ring = new ReadingRing(0)
    for (let t = 1000; t <= 3_600_000; t += 1000) {
      metrics.requests.record('app', 'tools/list', 'ok', 200, 0.001)
      ring.add(await readingAfter(metrics, t))
    }
    const kept = ring.all()
    expect(kept.length).toBeLessThanOrEqual((15 * 60_000) / SAMPLE_MS + 2)
    expect(kept[kept.length - 1]?.at).toBe(3_600_000)
    // The 1-minute baseline is a minute old, the history's points one sample apart at 1/s.
    expect(ring.baseline(3_600_000, 60_000).at).toBeLessThanOrEqual(3_540_000)
    const points = history(kept, 'app')
    expect(points.length).toBe(kept.length - 1)
    for (const p of points.slice(1)) expect(p.rps).toBeCloseTo(1, 1)
  })
})

describe('readMetrics', () => {
  it('reads cache hits and misses per server and method from the request counter', async () => {
    const metrics = createMetrics(false)
    metrics.requests.record('app', 'tools/list', 'cache_hit', 200, 0.001)
    metrics.requests.record('app', 'tools/list', 'cache_hit', 200, 0.001)
    metrics.requests.record('app', 'tools/list', 'ok', 200, 0.01)
    metrics.requests.record('app', 'tools/call', 'ok', 200, 0.01) // not a cacheable method
    metrics.requests.record('app', 'tools/list', 'policy_denied', 200, 0.001) // not an answer
    metrics.cacheEvents.inc({ event: 'hit' }, 2)
    metrics.rateLimited.inc({ limit: 'calls' }, 3)
    const r = await readingAfter(metrics, 5000)
    expect(r.cache.get('app')?.get('tools/list')).toEqual({ hits: 2, misses: 1 })
    expect(r.cache.get('app')?.has('tools/call')).toBe(false)
    expect(r.cacheEvents.get('hit')).toBe(2)
    expect(r.rateLimited.get('calls')).toBe(3)
    expect(r.servers.get('app')?.requests).toBe(5)
  })
})
