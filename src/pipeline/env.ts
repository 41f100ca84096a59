import type { HttpBindings } from '@hono/node-server'
import type { Principal } from '../auth/principal.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import type { ListFilter } from '../mcp/list-filter.js'
import type { ResultHook } from '../mcp/result-transform.js'
import type { RequestHead } from '../mcp/request-head.js'
import type { GatewayRuntime, ServerRuntime } from '../runtime/runtime.js'
import type { StreamEnding } from './stream-ending.js'
import type { RequestTrace } from '../telemetry/request-trace.js'
import type { VirtualSession } from '../virtual/client-session.js'

/** The typed variables (c.get / c.set) that pipeline stages share. */
interface GatewayVariables {
  /** One id per request, made by the outermost stage (pipeline/access-log.ts). */
  requestId: string
  runtime: GatewayRuntime
  server: ServerRuntime
  head: RequestHead
  body: Buffer
  mcp: McpRequestInfo
  principal: Principal | undefined
  /** Stable reason code of the outcome, for the access log and metrics. */
  outcome: string
  upstreamId: string
  /** Rewrites of the upstream's final response (list filtering, cache capture), in order. */
  resultHooks: readonly ResultHook[] | undefined
  /** The caller's view of list results (policy); applied after any cache capture. */
  listFilter: ListFilter | undefined
  /** The request's server span, when `telemetry:` is configured (pipeline/trace.ts). */
  trace: RequestTrace | undefined
  /**
   * Set by the proxy when a long-lived stream outlives the stages (pipeline/proxy.ts): runs its
   * listeners when the stream ends, with what the stages would otherwise read from the context.
   */
  streamEnd: StreamEnding | undefined
  /** The 2025-era client session of a virtual server's request (pipeline/virtual-legacy.ts). */
  virtualSession: VirtualSession | undefined
}

/** Hono environment of the gateway app. */
export type GatewayEnv = { Bindings: HttpBindings; Variables: GatewayVariables }
