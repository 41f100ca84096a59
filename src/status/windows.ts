import { CAUSES, causeOf, type Cause } from './outcomes.js'
import { emptyReading, type CacheCounts, type Reading, type ServerCounts } from './reading.js'

/** How often a reading is kept, and how far back the chart goes. */
export const SAMPLE_MS = 5000
export const HISTORY_MS = 15 * 60_000
/** The windows figures are given over. */
export const WINDOWS = { '1m': 60_000, '5m': 300_000 } as const
export type WindowName = keyof typeof WINDOWS
/**
 * Readings keep their per-tool counts only this often (the others drop them): the tool table's
 * window starts at such a reading, so it covers 5 to 6 minutes, and what the ring holds stays
 * small whatever the number of tools (windows.ts ReadingRing).
 */
const TOOLS_EVERY_MS = 60_000

/** One server's traffic over one window. */
export interface TrafficWindow {
  /** How long the window actually covers (less than asked for a process younger than it). */
  readonly seconds: number
  readonly requests: number
  readonly rps: number
  /** Share of requests answered with a status of 400 or more (0…1); null without requests. */
  readonly errorShare: number | null
  /** Share of requests per outcome other than `ok` (0…1), named as outcomes.ts names them. */
  readonly outcomes: Readonly<Record<string, number>>
  /** Requests per cause (outcomes.ts): they add up to `requests`. */
  readonly causes: Readonly<Record<Cause, number>>
  /** Requests per outcome, `ok` included: each falls in one cause. */
  readonly outcomeCounts: Readonly<Record<string, number>>
  /** Latency quantiles (ms), interpolated in the histogram's buckets; null without requests. */
  readonly p50Ms: number | null
  readonly p95Ms: number | null
  readonly p99Ms: number | null
}

/** One tool's `tools/call` operations over the tool window (TOOLS_EVERY_MS). */
export interface ToolWindow {
  readonly tool: string
  readonly calls: number
  readonly errors: number
  readonly denials: number
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

  /**
   * Keeps `r` when the last kept reading is at least a sample old; drops what is too old. Its
   * tool counts are kept when the last reading that kept them is TOOLS_EVERY_MS old.
   */
  add(r: Reading): void {
    const last = this.readings[this.readings.length - 1]
    if (last !== undefined && r.at - last.at < SAMPLE_MS * 0.9) return
    const withTools = this.readings.findLast((x) => x.tools !== undefined)
    const keepTools =
      withTools === undefined || r.at - withTools.at >= TOOLS_EVERY_MS - SAMPLE_MS / 10
    this.readings.push(keepTools ? r : { ...r, tools: undefined })
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

  /** The newest reading with tool counts at least `ms` older than `at` (else the oldest with). */
  toolBaseline(at: number, ms: number): Reading {
    let base: Reading | undefined
    for (const r of this.readings) {
      if (r.tools === undefined) continue
      if (base !== undefined && r.at > at - ms) break
      base = r
    }
    return base ?? emptyReading(this.readings[0]?.at ?? at)
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
  const counts = new Map<string, number>()
  const causes = Object.fromEntries(CAUSES.map((c) => [c, 0])) as Record<Cause, number>
  for (const [outcome, n] of b?.outcomes ?? []) {
    const d = delta(n, a?.outcomes.get(outcome))
    if (d <= 0) continue
    counts.set(outcome, d)
    causes[causeOf(outcome)] += d
    if (outcome !== 'ok' && requests > 0) outcomes.set(outcome, round(d / requests, 4))
  }
  const latency = cumulativeDelta(b?.latency, a?.latency, now.bounds, then.bounds)
  return {
    seconds: Math.round(seconds),
    requests,
    rps: seconds > 0 ? round(requests / seconds, 3) : 0,
    errorShare: requests > 0 ? round(delta(b?.errors, a?.errors) / requests, 4) : null,
    outcomes: Object.fromEntries(outcomes),
    causes,
    outcomeCounts: Object.fromEntries(counts),
    p50Ms: roundOrNull(quantileMs(latency, now.bounds, 0.5), 2),
    p95Ms: roundOrNull(quantileMs(latency, now.bounds, 0.95), 2),
    p99Ms: roundOrNull(quantileMs(latency, now.bounds, 0.99), 2),
  }
}

/** A server's `tools/call` operations per tool between two readings, most called first. */
export function toolsBetween(then: Reading, now: Reading, server: string): ToolWindow[] {
  const a = then.tools?.get(server)
  const out: ToolWindow[] = []
  for (const [tool, b] of now.tools?.get(server) ?? []) {
    const before = a?.get(tool)
    const calls = delta(b.calls, before?.calls)
    if (calls === 0) continue
    const latency = cumulativeDelta(b.latency, before?.latency, now.toolBounds, then.toolBounds)
    out.push({
      tool,
      calls,
      errors: delta(b.errors, before?.errors),
      denials: delta(b.denials, before?.denials),
      p50Ms: roundOrNull(quantileMs(latency, now.toolBounds, 0.5), 2),
      p95Ms: roundOrNull(quantileMs(latency, now.toolBounds, 0.95), 2),
    })
  }
  return out.sort((x, y) => y.calls - x.calls || x.tool.localeCompare(y.tool))
}

/** A cacheable method's counts between two readings: misses exclude what could not be kept. */
export interface CacheWindow {
  readonly hits: number
  readonly misses: number
  readonly notCacheable: number
  readonly notCacheableBy: Readonly<Record<string, number>>
}

export function cacheBetween(then: CacheCounts | undefined, now: CacheCounts): CacheWindow {
  const by = new Map<string, number>()
  let notCacheable = 0
  for (const [reason, n] of now.notCacheable) {
    const d = delta(n, then?.notCacheable.get(reason))
    if (d <= 0) continue
    by.set(reason, d)
    notCacheable += d
  }
  // An answer is counted as not kept when it ends, as a request when its line is written: the
  // two may straddle a reading, so a miss count never goes below zero.
  const answered = delta(now.answered, then?.answered)
  return {
    hits: delta(now.hits, then?.hits),
    misses: Math.max(0, answered - notCacheable),
    notCacheable,
    notCacheableBy: Object.fromEntries(by),
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

/**
 * Answered from the cache over what the cache could have answered (hits and misses; answers the
 * backend made not cacheable are not misses), between two readings (0…1).
 */
export function hitRatio(then: Reading, now: Reading, server?: string): number | null {
  let hits = 0
  let misses = 0
  for (const [s, methods] of now.cache) {
    if (server !== undefined && s !== server) continue
    for (const [method, c] of methods) {
      const w = cacheBetween(then.cache.get(s)?.get(method), c)
      hits += w.hits
      misses += w.misses
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

function cumulativeDelta(
  now: ServerCounts['latency'] | undefined,
  then: ServerCounts['latency'] | undefined,
  bounds: readonly number[],
  thenBounds: readonly number[],
): number[] {
  return bounds.map((le, i) => {
    const j = thenBounds.indexOf(le)
    return delta(now?.[i], j === -1 ? 0 : then?.[j])
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
