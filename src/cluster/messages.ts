/** The checker worker's result for one replica, relayed by the primary to the other workers. */
export interface HealthMessage {
  readonly type: 'mcp-edge:health'
  readonly server: string
  readonly url: string
  readonly down: boolean
  readonly reason: string
}

/** Env variable naming a worker's slot (0…N-1); slot 0 runs the active health checks. */
export const SLOT_ENV = 'MCP_EDGE_WORKER_SLOT'

/** Env variable carrying the primary's random sealing key (hex) when `legacySessions.key` is unset. */
export const KEY_ENV = 'MCP_EDGE_WORKER_SEALING_KEY'

export function isHealthMessage(msg: unknown): msg is HealthMessage {
  return (
    typeof msg === 'object' &&
    msg !== null &&
    (msg as { type?: unknown }).type === 'mcp-edge:health'
  )
}
