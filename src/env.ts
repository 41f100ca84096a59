import type { HttpBindings } from '@hono/node-server'
import type { McpRequestInfo } from './mcp/classify.js'
import type { ListFilter } from './mcp/list-filter.js'
import type { ResultHook } from './mcp/result-transform.js'
import type { RequestHead } from './mcp/request-head.js'
import type { GatewayRuntime, ServerRuntime } from './runtime/runtime.js'

/** Verified identity of the caller (issue 3); absent when auth is not configured. */
export interface Principal {
  readonly subject: string
  readonly issuer: string
  readonly claims: Readonly<Record<string, unknown>>
  readonly scopes: ReadonlySet<string>
  /** Raw bearer token: used only for token exchange, never logged or forwarded. */
  readonly token: string
}

/** The typed variables (c.get / c.set) that pipeline stages share. */
export interface GatewayVariables {
  runtime: GatewayRuntime
  server: ServerRuntime
  head: RequestHead
  body: Buffer
  mcp: McpRequestInfo
  principal: Principal | undefined
  /** `Authorization` for the backend from token exchange (RFC 8693); never the caller's own. */
  upstreamAuthorization: string | undefined
  /** Stable reason code of the outcome, for the access log and metrics. */
  outcome: string
  upstreamId: string
  /** Rewrites of the upstream's final response (list filtering, cache capture), in order. */
  resultHooks: readonly ResultHook[] | undefined
  /** The caller's view of list results (policy); applied after any cache capture. */
  listFilter: ListFilter | undefined
}

/** Hono environment of the gateway app. */
export type GatewayEnv = { Bindings: HttpBindings; Variables: GatewayVariables }
