import { emptyReading, type Reading, type ServerCounts } from './reading.js'

/** How often a reading is kept, and how far back the chart goes. */
export const SAMPLE_MS = 5000
export const HISTORY_MS = 15 * 60_000
/** The windows figures are given over. */
export const WINDOWS = { '1m': 60_000, '5m': 300_000 } as const
export type WindowName = keyof typeof WINDOWS

/** One server's traffic over one window. */
export interface TrafficWindow {
  /** How long the window actually covers (less than asked for a process younger than it). */
  readonly seconds: number
  readonly requests: number
  readonly rps: number
  /** Share of requests answered with a status of 400 or more (0…1); null without requests. */
  readonly errorShare: number | null
  /** Share of requests per outcome other than `ok` (0…1). */
  readonly outcomes: Readonly<Record<string, number>>
  /** Latency quantiles (ms), interpolated in the histogram's buckets; null without requests. */
  readonly p50Ms: number | null
  readonly p95Ms: number | null
}

/** One point of a server's chart: the interval ending at `at`. */
export interface HistoryPoint {
  readonly at: string
  readonly rps: number
  /** Answered from the cache over answered by cache or backend (0…1); null with neither. */
  readonly hitRatio: number | null
}

/**
 * Readings of the last HISTORY_MS, one per SAMPLE_MS at most (bounded: about 180), oldest first.
 * It starts with a zero reading at the process's start: counters start at zero.
 */
export class ReadingRing {
  private readonly readings: Reading[]

  constructor(startedAt: number) {
    this.readings = [emptyReading(startedAt)]
  }

  /** Keeps `r` when the last kept reading is at least a sample old; drops what is too old. */
  add(r: Reading): void {
    const last = this.readings[this.readings.length - 1]
    if (last !== undefined && r.at - last.at < SAMPLE_MS * 0.9) return
    this.readings.push(r)
    // One reading older than the history stays: it is the baseline of the first interval.
    while (this.readings.length > 2 && (this.readings[1]?.at ?? 0) <= r.at - HISTORY_MS)
      this.readings.shift()
  }

  /** The reading a window ending at `at` starts from: the newest one at least `ms` older. */
  baseline(at: number, ms: number): Reading {
    let base = this.readings[0] as Reading
    for (const r of this.readings) {
      if (r.at > at - ms) break
      base = r
    }
    return base
  }

  all(): readonly Reading[] {
    return this.readings
  }
}

/** A server's traffic between two readings. */
export function trafficBetween(then: Reading, now: Reading, server: string): TrafficWindow {
  const a = then.servers.get(server)
  const b = now.servers.get(server)
  const seconds = Math.max(0, (now.at - then.at) / 1000)
  const requests = delta(b?.requests, a?.requests)
  const outcomes = new Map<string, number>()
  for (const [outcome, n] of b?.outcomes ?? []) {
    const d = delta(n, a?.outcomes.get(outcome))
    if (outcome !== 'ok' && d > 0 && requests > 0) outcomes.set(outcome, round(d / requests, 4))
  }
  const latency = latencyDelta(b, a, now.bounds, then.bounds)
  return {
    seconds: Math.round(seconds),
    requests,
    rps: seconds > 0 ? round(requests / seconds, 3) : 0,
    errorShare: requests > 0 ? round(delta(b?.errors, a?.errors) / requests, 4) : null,
    outcomes: Object.fromEntries(outcomes),
    p50Ms: roundOrNull(quantileMs(latency, now.bounds, 0.5), 2),
    p95Ms: roundOrNull(quantileMs(latency, now.bounds, 0.95), 2),
  }
}

/** Requests per second and hit ratio of every interval the ring holds, per server. */
export function history(readings: readonly Reading[], server: string): HistoryPoint[] {
  const out: HistoryPoint[] = []
  for (let i = 1; i < readings.length; i++) {
    const a = readings[i - 1] as Reading
    const b = readings[i] as Reading
    const seconds = (b.at - a.at) / 1000
    if (seconds <= 0) continue
    const requests = delta(b.servers.get(server)?.requests, a.servers.get(server)?.requests)
    out.push({
      at: new Date(b.at).toISOString(),
      rps: round(requests / seconds, 3),
      hitRatio: hitRatio(a, b, server),
    })
  }
  return out
}

/** Answered from the cache over answered by cache or backend, between two readings (0…1). */
export function hitRatio(then: Reading, now: Reading, server?: string): number | null {
  let hits = 0
  let misses = 0
  for (const [s, methods] of now.cache) {
    if (server !== undefined && s !== server) continue
    for (const [method, c] of methods) {
      const before = then.cache.get(s)?.get(method)
      hits += delta(c.hits, before?.hits)
      misses += delta(c.misses, before?.misses)
    }
  }
  return hits + misses > 0 ? round(hits / (hits + misses), 4) : null
}

/** Figures in status.json carry the digits that mean something. */
export function round(v: number, digits: number): number {
  const f = 10 ** digits
  return Math.round(v * f) / f
}

function roundOrNull(v: number | null, digits: number): number | null {
  return v === null ? null : round(v, digits)
}

/**
 * The increase of a counter. A sum over workers falls when a worker restarts (its counters start
 * again at zero): that interval counts from zero rather than going negative.
 */
export function delta(now: number | undefined, then: number | undefined): number {
  const d = (now ?? 0) - (then ?? 0)
  return d >= 0 ? d : (now ?? 0)
}

function latencyDelta(
  now: ServerCounts | undefined,
  then: ServerCounts | undefined,
  bounds: readonly number[],
  thenBounds: readonly number[],
): number[] {
  return bounds.map((le, i) => {
    const j = thenBounds.indexOf(le)
    return delta(now?.latency[i], j === -1 ? 0 : then?.latency[j])
  })
}

/**
 * The q-quantile of a cumulative histogram, interpolated linearly within its bucket as
 * Prometheus's histogram_quantile() does; in the +Inf bucket, the highest finite bound.
 */
export function quantileMs(
  cumulative: readonly number[],
  bounds: readonly number[],
  q: number,
): number | null {
  const total = cumulative[cumulative.length - 1] ?? 0
  if (total <= 0) return null
  const rank = q * total
  for (let i = 0; i < cumulative.length; i++) {
    const c = cumulative[i] ?? 0
    if (c < rank) continue
    const upper = bounds[i] ?? Infinity
    const lower = i === 0 ? 0 : (bounds[i - 1] ?? 0)
    if (upper === Infinity) return lower * 1000
    const below = i === 0 ? 0 : (cumulative[i - 1] ?? 0)
    const inBucket = c - below
    const seconds = inBucket > 0 ? lower + ((upper - lower) * (rank - below)) / inBucket : upper
    return seconds * 1000
  }
  return null
}
