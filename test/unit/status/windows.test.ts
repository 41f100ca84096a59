import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../../src/observability/metrics.js'
import { emptyReading, readMetrics, type Reading } from '../../../src/status/reading.js'
import {
  cacheBetween,
  delta,
  history,
  hitRatio,
  quantileMs,
  ReadingRing,
  SAMPLE_MS,
  toolsBetween,
  trafficBetween,
} from '../../../src/status/windows.js'

const emptyAt = emptyReading

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
    // One cause per request: they add up to the request count.
    expect(w.causes).toEqual({
      ok: 8,
      cache: 0,
      denied: 1,
      limited: 1,
      refused: 0,
      backend: 0,
      failed: 0,
    })
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
    expect(r.cache.get('app')?.get('tools/list')).toEqual({
      hits: 2,
      answered: 1,
      notCacheable: new Map(),
    })
    expect(r.cache.get('app')?.has('tools/call')).toBe(false)
    expect(r.cacheEvents.get('hit')).toBe(2)
    expect(r.rateLimited.get('calls')).toBe(3)
    expect(r.servers.get('app')?.requests).toBe(5)
  })
})

describe('one outcome vocabulary', () => {
  it('counts a backend error answer, a notification and a cache hit each under one cause', async () => {
    const metrics = createMetrics(false)
    const start = 2_000_000
    metrics.requests.record('app', 'tools/call', 'ok', 200, 0.004)
    // A backend's own HeaderMismatch answer is the backend's error, not an ok nor the gateway's.
    metrics.requests.record('app', 'tools/call', 'ok', 400, 0.002)
    metrics.requests.record('app', 'tools/call', 'header_mismatch', 400, 0.001)
    // A notification a virtual server accepted is ok, as on the direct route.
    metrics.requests.record('ws', 'notifications/initialized', 'accepted', 202, 0.001)
    metrics.requests.record('ws', 'notifications/initialized', 'ok', 202, 0.001)
    metrics.requests.record('app', 'tools/list', 'cache_hit', 200, 0.001)
    metrics.requests.record('app', 'tools/call', 'upstream_unavailable', 502, 0.001)
    metrics.requests.record('app', 'tools/call', 'catalog_hidden', 200, 0.001)
    const now = await readingAfter(metrics, start + 10_000)
    const w = trafficBetween(emptyAt(start), now, 'app')
    expect(w.outcomeCounts).toEqual({
      ok: 1,
      backend_400: 1,
      header_mismatch: 1,
      cache_hit: 1,
      upstream_unavailable: 1,
      catalog_hidden: 1,
    })
    expect(w.causes).toEqual({
      ok: 1,
      cache: 1,
      denied: 1,
      limited: 0,
      refused: 1,
      backend: 1,
      failed: 1,
    })
    expect(trafficBetween(emptyAt(start), now, 'ws').outcomeCounts).toEqual({ ok: 2 })
  })

  it('counts answers the cache could not keep apart from misses, by reason', async () => {
    const metrics = createMetrics(false)
    const start = 3_000_000
    const ring = new ReadingRing(start)
    for (let i = 0; i < 4; i++) metrics.requests.record('docs', 'tools/list', 'ok', 200, 0.01)
    metrics.cacheUncacheable.inc({ server: 'docs', method: 'tools/list', reason: 'no_ttl' }, 3)
    metrics.requests.record('docs', 'tools/list', 'cache_hit', 200, 0.001)
    const now = await readingAfter(metrics, start + 10_000)
    ring.add(now)
    const counts = now.cache.get('docs')?.get('tools/list')
    expect(cacheBetween(undefined, counts as NonNullable<typeof counts>)).toEqual({
      hits: 1,
      misses: 1,
      notCacheable: 3,
      notCacheableBy: { no_ttl: 3 },
    })
    // One hit of two that could be cached: 50 %, not one of five.
    expect(hitRatio(emptyAt(start), now)).toBe(0.5)
    expect(history(ring.all(), 'docs')[0]?.hitRatio).toBe(0.5)
  })

  it('reads tool calls per server and tool, denials apart from errors, with p95', async () => {
    const metrics = createMetrics(false)
    const start = 4_000_000
    const ring = new ReadingRing(start)
    for (let i = 0; i < 19; i++)
      metrics.operations.record(
        'weather',
        'tools/call',
        'get_alerts',
        '2026-07-28',
        undefined,
        0.004,
      )
    metrics.operations.record(
      'weather',
      'tools/call',
      'get_alerts',
      '2026-07-28',
      'upstream_timeout',
      2,
    )
    metrics.operations.record(
      'weather',
      'tools/call',
      'delete_station',
      '2026-07-28',
      'policy_denied',
      0.001,
    )
    metrics.operations.record('docs', 'tools/call', 'get_alerts', '2026-07-28', undefined, 0.004)
    metrics.operations.record('weather', 'tools/list', undefined, '2026-07-28', undefined, 0.004)
    const now = await readingAfter(metrics, start + 10_000)
    ring.add(now)
    const rows = toolsBetween(ring.toolBaseline(now.at, 300_000), now, 'weather')
    expect(
      rows.map(({ tool, calls, errors, denials }) => ({ tool, calls, errors, denials })),
    ).toEqual([
      { tool: 'get_alerts', calls: 20, errors: 1, denials: 0 },
      { tool: 'delete_station', calls: 1, errors: 0, denials: 1 },
    ])
    expect(rows[0]?.p50Ms).toBeLessThanOrEqual(5)
    expect(rows[0]?.p95Ms).toBeLessThanOrEqual(5)
    expect(toolsBetween(emptyAt(start), now, 'docs')).toHaveLength(1)
  })

  it('keeps tool counts in one reading a minute, so the tool window covers 5 to 6 minutes', async () => {
    const metrics = createMetrics(false)
    const ring = new ReadingRing(0)
    for (let t = 5000; t <= 900_000; t += 5000) {
      metrics.operations.record('app', 'tools/call', 'echo', '2026-07-28', undefined, 0.001)
      ring.add(await readingAfter(metrics, t))
    }
    const withTools = ring.all().filter((r) => r.tools !== undefined)
    expect(withTools.length).toBeLessThanOrEqual(16)
    const base = ring.toolBaseline(900_000, 300_000)
    expect(900_000 - base.at).toBeGreaterThanOrEqual(300_000)
    expect(900_000 - base.at).toBeLessThanOrEqual(360_000)
  })
})
