import type { Registry } from 'prom-client'

/**
 * `mcp.server.operation.duration` of the OpenTelemetry MCP semantic conventions, in its Prometheus
 * form (OpenTelemetry "Prometheus and OpenMetrics compatibility": dots become underscores, the
 * unit `s` becomes the `_seconds` suffix): `mcp_server_operation_duration_seconds`, labelled
 * `mcp_method_name`, `gen_ai_tool_name`, `mcp_protocol_version`, `error_type`, and
 * `mcp_edge_server` (the span's `mcp_edge.server`: one gateway fronts many servers, whose tools
 * must not be summed together). Same slot design as request-metrics.ts: each label set gets a slot
 * once; no label hashing per request.
 */
export interface OperationMetrics {
  record(
    server: string,
    method: string,
    tool: string | undefined,
    version: string | undefined,
    errorType: string | undefined,
    seconds: number,
  ): void
}

const NAME = 'mcp_server_operation_duration_seconds'
/** The conventions' advisory buckets, with 1 ms and 5 ms in front for answers from the edge. */
const BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300,
] as const

interface Slot {
  readonly labels: Record<string, string>
  readonly buckets: number[]
  count: number
  sum: number
}

type Sample = { metricName: string; labels: Record<string, string | number>; value: number }

/** Registers the operation duration histogram on `registry`. */
export function createOperationMetrics(registry: Registry): OperationMetrics {
  // Nested by label (method, tool, version, error type), not keyed by a joined string: labels are
  // interned strings whose hashes V8 keeps, a joined key is a new string per request.
  const slots: Level<Level<Level<Level<Level<Slot>>>>> = new Map()
  registry.registerMetric({
    name: NAME,
    get: () => ({
      name: NAME,
      help: 'MCP request or notification duration as observed by the gateway (OpenTelemetry MCP conventions)',
      type: 'histogram',
      aggregator: 'sum',
      values: leaves(slots).flatMap(samples),
    }),
  } as unknown as Parameters<Registry['registerMetric']>[0])
  return {
    record(server, method, tool, version, errorType, seconds) {
      const byError = child(child(child(child(slots, server), method), tool ?? ''), version ?? '')
      let s = byError.get(errorType ?? '')
      if (s === undefined) {
        const labels: Record<string, string> = { mcp_method_name: method }
        // Absent attributes are absent labels, as the OpenTelemetry Prometheus exporter writes them.
        if (tool !== undefined) labels['gen_ai_tool_name'] = tool
        if (version !== undefined) labels['mcp_protocol_version'] = version
        if (errorType !== undefined) labels['error_type'] = errorType
        labels['mcp_edge_server'] = server
        s = { labels, buckets: BUCKETS.map(() => 0), count: 0, sum: 0 }
        byError.set(errorType ?? '', s)
      }
      s.count++
      s.sum += seconds
      for (let i = 0; i < BUCKETS.length; i++) {
        if (seconds <= (BUCKETS[i] as number)) {
          s.buckets[i] = (s.buckets[i] as number) + 1
          break
        }
      }
    },
  }
}

type Level<V> = Map<string, V>

/** The map under `key`, made on first use. */
function child<V>(m: Level<Level<V>>, key: string): Level<V> {
  let c = m.get(key)
  if (c === undefined) m.set(key, (c = new Map()))
  return c
}

function leaves(slots: Level<Level<Level<Level<Level<Slot>>>>>): Slot[] {
  const out: Slot[] = []
  for (const s of slots.values())
    for (const a of s.values())
      for (const b of a.values()) for (const c of b.values()) out.push(...c.values())
  return out
}

/** Cumulative buckets, +Inf, sum and count, as prom-client's text format expects them. */
function samples(s: Slot): Sample[] {
  const out: Sample[] = []
  let cumulative = 0
  BUCKETS.forEach((le, i) => {
    cumulative += s.buckets[i] as number
    out.push({ metricName: `${NAME}_bucket`, labels: { ...s.labels, le }, value: cumulative })
  })
  out.push({ metricName: `${NAME}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count })
  out.push({ metricName: `${NAME}_sum`, labels: s.labels, value: s.sum })
  out.push({ metricName: `${NAME}_count`, labels: s.labels, value: s.count })
  return out
}
