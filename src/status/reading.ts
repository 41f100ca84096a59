import { CACHEABLE_METHODS } from '../mcp/methods.js'
import { causeOf, outcomeName } from './outcomes.js'

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
  /** Requests per outcome, named as outcomes.ts outcomeName names them. */
  readonly outcomes: ReadonlyMap<string, number>
  /** Cumulative request counts at each of `Reading.bounds`, summed over methods. */
  readonly latency: readonly number[]
}

/** Cacheable-method requests of one server and method. */
export interface CacheCounts {
  /** Answered from the cache (fresh or stale). */
  readonly hits: number
  /** Answered by the backend (status below 400): misses and answers it could not keep. */
  readonly answered: number
  /** Of those, answers the cache could not keep, by reason (mcp_edge_cache_uncacheable_total). */
  readonly notCacheable: ReadonlyMap<string, number>
}

/** `tools/call` operations of one server and tool (mcp_server_operation_duration_seconds). */
interface ToolCounts {
  readonly calls: number
  /** Calls with an `error_type` other than a denial. */
  readonly errors: number
  /** Calls the allowlist or the catalog denied (`policy_denied`, `catalog_*`). */
  readonly denials: number
  /** Cumulative counts at each of `Reading.toolBounds`. */
  readonly latency: readonly number[]
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
  /** server → tool → counts; undefined where the ring dropped them (windows.ts TOOLS_EVERY_MS). */
  readonly tools: ReadonlyMap<string, ReadonlyMap<string, ToolCounts>> | undefined
  /** Upper bounds (seconds) of the operation histogram's buckets; the last is Infinity. */
  readonly toolBounds: readonly number[]
}

const REQUESTS = 'mcp_edge_requests_total'
const DURATION = 'mcp_edge_request_duration_seconds'
const OPERATIONS = 'mcp_server_operation_duration_seconds'
const UNCACHEABLE = 'mcp_edge_cache_uncacheable_total'

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
    tools: none,
    toolBounds: [],
  }
}

interface MutableCounts {
  requests: number
  errors: number
  outcomes: Map<string, number>
  latency: number[]
}

interface MutableCache {
  hits: number
  answered: number
  notCacheable: Map<string, number>
}

interface MutableTool {
  calls: number
  errors: number
  denials: number
  latency: number[]
}

/** Reduces a registry's JSON to the counters the status page shows. */
export function readMetrics(metrics: readonly MetricJson[], at: number): Reading {
  const byName = new Map(metrics.map((m) => [m.name, m]))
  const servers = new Map<string, MutableCounts>()
  const cache = new Map<string, Map<string, MutableCache>>()
  const counts = (server: string): MutableCounts => getOr(servers, server, emptyCounts)
  const cacheOf = (server: string, method: string): MutableCache =>
    getOr(
      getOr(cache, server, () => new Map()),
      method,
      emptyCache,
    )
  for (const v of byName.get(REQUESTS)?.values ?? []) {
    const server = String(v.labels['server'] ?? 'unknown')
    const method = String(v.labels['method'] ?? 'none')
    const status = Number(v.labels['status'])
    const name = outcomeName(String(v.labels['outcome'] ?? 'ok'), status)
    const c = counts(server)
    c.requests += v.value
    if (status >= 400) c.errors += v.value
    c.outcomes.set(name, (c.outcomes.get(name) ?? 0) + v.value)
    if (!CACHEABLE_METHODS.has(method)) continue
    const cause = causeOf(name)
    if (cause === 'cache') cacheOf(server, method).hits += v.value
    else if (cause === 'ok') cacheOf(server, method).answered += v.value
  }
  for (const v of byName.get(UNCACHEABLE)?.values ?? []) {
    const m = cacheOf(String(v.labels['server']), String(v.labels['method']))
    const reason = String(v.labels['reason'])
    m.notCacheable.set(reason, (m.notCacheable.get(reason) ?? 0) + v.value)
  }
  const latency = histogram(byName.get(DURATION), DURATION, (l) => String(l['server'] ?? ''))
  for (const [server, cumulative] of latency.byKey) counts(server).latency = cumulative
  return {
    at,
    servers,
    bounds: latency.bounds,
    cache,
    cacheEvents: byLabel(byName.get('mcp_edge_cache_events_total'), 'event'),
    rateLimited: byLabel(byName.get('mcp_edge_rate_limited_total'), 'limit'),
    tableFull: byLabel(byName.get('mcp_edge_rate_limit_table_full_total'), 'limit'),
    ...readTools(byName.get(OPERATIONS)),
  }
}

/** tools/call operations per server and tool, from the operation histogram. */
function readTools(metric: MetricJson | undefined): Pick<Reading, 'tools' | 'toolBounds'> {
  const tools = new Map<string, Map<string, MutableTool>>()
  const calls = (l: MetricJson['values'][number]['labels']): MutableTool | undefined => {
    if (l['mcp_method_name'] !== 'tools/call' || l['gen_ai_tool_name'] === undefined) return
    const server = String(l['mcp_edge_server'] ?? 'unknown')
    return getOr(
      getOr(tools, server, () => new Map()),
      String(l['gen_ai_tool_name']),
      emptyTool,
    )
  }
  for (const v of metric?.values ?? []) {
    if (v.metricName !== `${OPERATIONS}_count`) continue
    const t = calls(v.labels)
    if (t === undefined) continue
    t.calls += v.value
    const error = v.labels['error_type']
    if (error === undefined) continue
    if (causeOf(String(error)) === 'denied') t.denials += v.value
    else t.errors += v.value
  }
  const latency = histogram(metric, OPERATIONS, (l) => {
    if (l['mcp_method_name'] !== 'tools/call' || l['gen_ai_tool_name'] === undefined) return
    return `${String(l['mcp_edge_server'] ?? 'unknown')}\n${String(l['gen_ai_tool_name'])}`
  })
  for (const [key, cumulative] of latency.byKey) {
    const [server, tool] = key.split('\n') as [string, string]
    const t = tools.get(server)?.get(tool)
    if (t !== undefined) t.latency = cumulative
  }
  return { tools, toolBounds: latency.bounds }
}

/**
 * A histogram's cumulative buckets summed per key (labels the key leaves out are summed over;
 * undefined skips a sample), on the union of the bucket bounds seen.
 */
function histogram(
  metric: MetricJson | undefined,
  name: string,
  key: (labels: MetricJson['values'][number]['labels']) => string | undefined,
): { readonly bounds: number[]; readonly byKey: Map<string, number[]> } {
  const bounds = new Set<number>()
  const byLe = new Map<string, Map<number, number>>()
  for (const v of metric?.values ?? []) {
    if (v.metricName !== `${name}_bucket`) continue
    const le = v.labels['le'] === '+Inf' ? Infinity : Number(v.labels['le'])
    const k = key(v.labels)
    if (Number.isNaN(le) || k === undefined) continue
    bounds.add(le)
    const m = getOr(byLe, k, () => new Map<number, number>())
    m.set(le, (m.get(le) ?? 0) + v.value)
  }
  const sorted = [...bounds].sort((a, b) => a - b)
  const byKey = new Map<string, number[]>()
  for (const [k, m] of byLe) byKey.set(k, cumulativeOn(sorted, m))
  return { bounds: sorted, byKey }
}

/** A key's cumulative counts on `bounds`; a bound it has no sample for holds the one below. */
function cumulativeOn(bounds: readonly number[], m: ReadonlyMap<number, number>): number[] {
  let last = 0
  return bounds.map((le) => (last = m.get(le) ?? last))
}

function byLabel(metric: MetricJson | undefined, label: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const v of metric?.values ?? []) {
    const key = String(v.labels[label] ?? '')
    out.set(key, (out.get(key) ?? 0) + v.value)
  }
  return out
}

function getOr<K, V>(m: Map<K, V>, k: K, make: () => V): V {
  let v = m.get(k)
  if (v === undefined) m.set(k, (v = make()))
  return v
}

const emptyCounts = (): MutableCounts => ({
  requests: 0,
  errors: 0,
  outcomes: new Map(),
  latency: [],
})
const emptyCache = (): MutableCache => ({ hits: 0, answered: 0, notCacheable: new Map() })
const emptyTool = (): MutableTool => ({ calls: 0, errors: 0, denials: 0, latency: [] })
