import type { IncomingHttpHeaders } from 'node:http'
import type { Principal } from '../auth/principal.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import type { RequestHead } from '../mcp/request-head.js'
import type { RequestTrace, SpanRequest } from '../telemetry/request-trace.js'
import { EVENT } from '../telemetry/events.js'
import type { ServerBalancing } from '../upstream/balancing.js'

/**
 * One judged request to one server, as its endpoint forwards it: what the stages have read and
 * decided, without hono. A direct request (`/mcp/<server>`) builds it from the context; a virtual
 * server builds one per member request from the client's, with the member's own targets and body.
 */
export interface EndpointCall {
  readonly http: 'POST' | 'GET' | 'DELETE'
  /**
   * The client request's id (pipeline/access-log.ts): a virtual server's member requests carry
   * their client request's, so its audit lines, access line and span share one.
   */
  readonly requestId: string
  /** The judged classification: method, era, targets, and the parsed message when read. */
  readonly mcp: McpRequestInfo
  /** The client's header block as judged (forward list, host, name, session id). */
  readonly head: RequestHead
  /** The judged body, byte for byte, or its bounded rewrite for a member (mcp/rewrite.ts). */
  readonly body: Buffer
  readonly principal: Principal | undefined
  /** The connection's peer address (never a header: the client writes those). */
  readonly peer: string | undefined
  /** The client's raw headers, for `balance: {hash: {header}}`. */
  readonly headers: IncomingHttpHeaders
  /** The request's server span, when `telemetry:` is configured. */
  readonly trace: RequestTrace | undefined
  /** What the span records of the request (called once, when the span starts). */
  readonly span: () => SpanRequest
}

/**
 * Who a stream, or a gateway session toward a 2025-only member, counts against: the verified
 * issuer and subject, else the connection's peer address.
 * SECURITY: never X-Forwarded-For or any other header: the client writes those, and could claim a
 * new address for every stream.
 */
export function callerKey(p: Principal | undefined, peer: string | undefined): string {
  // The issuer's length keeps `a` + `bc` and `ab` + `c` apart.
  return p === undefined ? `addr ${peer ?? ''}` : `sub ${p.issuer.length}:${p.issuer}${p.subject}`
}

/** The key for the server's `balance: {hash}`: a header or a claim, strings and numbers only. */
export function hashKeyOf(b: ServerBalancing, call: EndpointCall): string | undefined {
  const hash = b.hash
  if (hash === undefined) return undefined
  // No principal without auth: least-request.
  const v = hash.from === 'header' ? call.headers[hash.name] : call.principal?.claims[hash.name]
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined
}

/**
 * The gateway span's `traceparent` / `tracestate` for the backend, starting the span if it is not
 * yet; undefined without `telemetry:`.
 */
export function propagationOf(call: EndpointCall): Readonly<Record<string, string>> | undefined {
  const trace = call.trace
  if (trace === undefined) return undefined
  trace.begin(call.span())
  return trace.propagation()
}

/** The attempt callback of a call: one span event per try of a replica. */
export function attemptEvents(
  call: EndpointCall,
): ((replica: string, retry: number) => void) | undefined {
  const trace = call.trace
  // Made in a scope of its own: it outlives the stages for as long as a retried stream runs.
  return trace === undefined ? undefined : attemptEventsOf(trace)
}

function attemptEventsOf(trace: RequestTrace): (replica: string, retry: number) => void {
  return (replica, retry) => trace.event(EVENT.attempt, { 'mcp_edge.upstream.id': replica, retry })
}
