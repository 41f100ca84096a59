import { CACHEABLE_METHODS } from '../mcp/methods.js'

/** One metric as prom-client's getMetricsAsJSON() gives it (and AggregatorRegistry sums it). */
export interface MetricJson {
  readonly name: string
  readonly values: readonly {
    readonly value: number
    readonly labels: Readonly<Record<string, string | number | undefined>>
    readonly metricName?: string | undefined
  }[]
}

/** What the status model reads of one server's counters at one moment. */
export interface ServerCounts {
  readonly requests: number
  /** Requests answered with a status of 400 or more. */
  readonly errors: number
  readonly outcomes: ReadonlyMap<string, number>
  /** Cumulative request counts at each of `Reading.bounds`, summed over methods. */
  readonly latency: readonly number[]
}

/** Cacheable-method requests of one server and method: answered from the cache, and by the backend. */
interface CacheCounts {
  readonly hits: number
  readonly misses: number
}

/**
 * The gateway's counters at one moment, read from the Prometheus registry (the same numbers
 * /metrics shows, summed over workers the way /metrics sums them): the status model adds no
 * counting of its own on the request path. Windows are differences of two readings (windows.ts).
 */
export interface Reading {
  /** ms since the epoch. */
  readonly at: number
  readonly servers: ReadonlyMap<string, ServerCounts>
  /** Upper bounds (seconds) of the latency buckets; the last is Infinity. */
  readonly bounds: readonly number[]
  /** server → method → counts, for the cacheable methods. */
  readonly cache: ReadonlyMap<string, ReadonlyMap<string, CacheCounts>>
  /** mcp_edge_cache_events_total by event. */
  readonly cacheEvents: ReadonlyMap<string, number>
  /** mcp_edge_rate_limited_total and mcp_edge_rate_limit_table_full_total by limit. */
  readonly rateLimited: ReadonlyMap<string, number>
  readonly tableFull: ReadonlyMap<string, number>
}

const REQUESTS = 'mcp_edge_requests_total'
const DURATION = 'mcp_edge_request_duration_seconds'
/** Outcomes of a request answered from the cache (pipeline/edge-cache.ts). */
const FROM_CACHE = new Set(['cache_hit', 'cache_stale'])

/** A zero reading: a process's counters when it starts. */
export function emptyReading(at: number): Reading {
  const none = new Map()
  return {
    at,
    servers: none,
    bounds: [],
    cache: none,
    cacheEvents: none,
    rateLimited: none,
    tableFull: none,
  }
}

/** Reduces a registry's JSON to the counters the status page shows. */
export function readMetrics(metrics: readonly MetricJson[], at: number): Reading {
  const servers = new Map<string, MutableCounts>()
  const byLe = new Map<string, Map<number, number>>()
  const cache = new Map<string, Map<string, { hits: number; misses: number }>>()
  const counts = (server: string): MutableCounts => {
    let c = servers.get(server)
    if (c === undefined) {
      c = { requests: 0, errors: 0, outcomes: new Map(), latency: [] }
      servers.set(server, c)
    }
    return c
  }
  const byName = new Map(metrics.map((m) => [m.name, m]))
  for (const v of byName.get(REQUESTS)?.values ?? []) {
    const server = String(v.labels['server'] ?? 'unknown')
    const method = String(v.labels['method'] ?? 'none')
    const outcome = String(v.labels['outcome'] ?? 'ok')
    const c = counts(server)
    c.requests += v.value
    if (Number(v.labels['status']) >= 400) c.errors += v.value
    c.outcomes.set(outcome, (c.outcomes.get(outcome) ?? 0) + v.value)
    if (!CACHEABLE_METHODS.has(method)) continue
    const fromCache = FROM_CACHE.has(outcome)
    if (!fromCache && outcome !== 'ok') continue
    let methods = cache.get(server)
    if (methods === undefined) cache.set(server, (methods = new Map()))
    const m = methods.get(method) ?? { hits: 0, misses: 0 }
    if (fromCache) m.hits += v.value
    else m.misses += v.value
    methods.set(method, m)
  }
  const bounds = new Set<number>()
  for (const v of byName.get(DURATION)?.values ?? []) {
    if (v.metricName !== `${DURATION}_bucket`) continue
    const le = v.labels['le'] === '+Inf' ? Infinity : Number(v.labels['le'])
    if (Number.isNaN(le)) continue
    bounds.add(le)
    const server = String(v.labels['server'] ?? 'unknown')
    let m = byLe.get(server)
    if (m === undefined) byLe.set(server, (m = new Map()))
    m.set(le, (m.get(le) ?? 0) + v.value)
  }
  const sorted = [...bounds].sort((a, b) => a - b)
  for (const [server, m] of byLe) counts(server).latency = sorted.map((le) => m.get(le) ?? 0)
  return {
    at,
    servers,
    bounds: sorted,
    cache,
    cacheEvents: byLabel(byName.get('mcp_edge_cache_events_total'), 'event'),
    rateLimited: byLabel(byName.get('mcp_edge_rate_limited_total'), 'limit'),
    tableFull: byLabel(byName.get('mcp_edge_rate_limit_table_full_total'), 'limit'),
  }
}

interface MutableCounts {
  requests: number
  errors: number
  outcomes: Map<string, number>
  latency: number[]
}

function byLabel(metric: MetricJson | undefined, label: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const v of metric?.values ?? []) {
    const key = String(v.labels[label] ?? '')
    out.set(key, (out.get(key) ?? 0) + v.value)
  }
  return out
}
