import type { MetricJson } from '../status/reading.js'
import type { ProcessReport } from '../status/report.js'

/** The checker worker's result for one replica, relayed by the primary to the other workers. */
export interface HealthMessage {
  readonly type: 'mcp-edge:health'
  readonly server: string
  readonly url: string
  readonly down: boolean
  readonly reason: string
  /** When the probe ended (ms since the epoch): the status page's "last health check". */
  readonly at: number
}

/** The primary asks every worker for its status report (docs/operations.md §Status page). */
export interface StatusRequest {
  readonly type: 'mcp-edge:status?'
  readonly id: number
}

/** A worker's answer: its report and its registry's metrics, summed by the primary. */
export interface StatusReply {
  readonly type: 'mcp-edge:status'
  readonly id: number
  readonly report: ProcessReport
  readonly metrics: readonly MetricJson[]
}

/** Env variable naming a worker's slot (0…N-1); slot 0 runs the active health checks. */
export const SLOT_ENV = 'MCP_EDGE_WORKER_SLOT'

/** Env variable carrying the primary's random sealing key (hex) when `legacySessions.key` is unset. */
export const KEY_ENV = 'MCP_EDGE_WORKER_SEALING_KEY'

export function isHealthMessage(msg: unknown): msg is HealthMessage {
  return typeOf(msg) === 'mcp-edge:health'
}

export function isStatusRequest(msg: unknown): msg is StatusRequest {
  return typeOf(msg) === 'mcp-edge:status?'
}

export function isStatusReply(msg: unknown): msg is StatusReply {
  return typeOf(msg) === 'mcp-edge:status'
}

function typeOf(msg: unknown): unknown {
  return typeof msg === 'object' && msg !== null ? (msg as { type?: unknown }).type : undefined
}
