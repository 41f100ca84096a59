import type { Registry } from 'prom-client'

/**
 * Per-request counter and latency histogram, kept in plain arrays and handed to prom-client only
 * when /metrics is scraped. prom-client's own Counter/Histogram hash the label object on every
 * inc()/observe() (about 3 µs per request on the proxy path); the label sets here are few and
 * closed (config servers × known methods × outcome codes × statuses), so each gets a slot once.
 */
export interface RequestMetrics {
  record(server: string, method: string, outcome: string, status: number, seconds: number): void
}

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60] as const

interface CountSlot {
  readonly labels: Record<string, string | number>
  value: number
}
interface TimeSlot {
  readonly labels: Record<string, string>
  readonly buckets: number[]
  count: number
  sum: number
  /** The counters of this server and method, by outcome, then status. */
  readonly counts: Map<string, Map<number, CountSlot>>
}

/** Registers `mcp_edge_requests_total` and `mcp_edge_request_duration_seconds` on `registry`. */
export function createRequestMetrics(registry: Registry): RequestMetrics {
  // Nested by label, not keyed by a joined string: the labels are interned strings whose hashes
  // V8 keeps, where a joined key is a new string to build and hash on every request.
  const times = new Map<string, Map<string, TimeSlot>>()
  const timeSlots = (): TimeSlot[] => [...times.values()].flatMap((m) => [...m.values()])
  registry.registerMetric({
    name: 'mcp_edge_requests_total',
    get: () => ({
      name: 'mcp_edge_requests_total',
      help: 'Requests by outcome',
      type: 'counter',
      aggregator: 'sum',
      values: timeSlots().flatMap((t) =>
        [...t.counts.values()].flatMap((m) =>
          [...m.values()].map((c) => ({ labels: c.labels, value: c.value })),
        ),
      ),
    }),
  } as unknown as Parameters<Registry['registerMetric']>[0])
  registry.registerMetric({
    name: 'mcp_edge_request_duration_seconds',
    get: () => ({
      name: 'mcp_edge_request_duration_seconds',
      help: 'Time from request to the end of the response (streams included)',
      type: 'histogram',
      aggregator: 'sum',
      values: timeSlots().flatMap((s) => histogramValues(s)),
    }),
  } as unknown as Parameters<Registry['registerMetric']>[0])
  return {
    record(server, method, outcome, status, seconds) {
      let byMethod = times.get(server)
      if (byMethod === undefined) times.set(server, (byMethod = new Map()))
      let t = byMethod.get(method)
      if (t === undefined) {
        t = {
          labels: { server, method },
          buckets: BUCKETS.map(() => 0),
          count: 0,
          sum: 0,
          counts: new Map(),
        }
        byMethod.set(method, t)
      }
      let byStatus = t.counts.get(outcome)
      if (byStatus === undefined) t.counts.set(outcome, (byStatus = new Map()))
      let c = byStatus.get(status)
      if (c === undefined) {
        c = { labels: { server, method, outcome, status }, value: 0 }
        byStatus.set(status, c)
      }
      c.value++
      t.count++
      t.sum += seconds
      for (let i = 0; i < BUCKETS.length; i++) {
        if (seconds <= (BUCKETS[i] as number)) {
          t.buckets[i] = (t.buckets[i] as number) + 1
          break
        }
      }
    },
  }
}

/** Cumulative buckets, +Inf, sum and count, as prom-client's text format expects them. */
function histogramValues(
  s: TimeSlot,
): { metricName: string; labels: Record<string, string | number>; value: number }[] {
  const out: { metricName: string; labels: Record<string, string | number>; value: number }[] = []
  let cumulative = 0
  BUCKETS.forEach((le, i) => {
    cumulative += s.buckets[i] as number
    out.push({
      metricName: 'mcp_edge_request_duration_seconds_bucket',
      labels: { ...s.labels, le },
      value: cumulative,
    })
  })
  out.push({
    metricName: 'mcp_edge_request_duration_seconds_bucket',
    labels: { ...s.labels, le: '+Inf' },
    value: s.count,
  })
  out.push({ metricName: 'mcp_edge_request_duration_seconds_sum', labels: s.labels, value: s.sum })
  out.push({
    metricName: 'mcp_edge_request_duration_seconds_count',
    labels: s.labels,
    value: s.count,
  })
  return out
}
