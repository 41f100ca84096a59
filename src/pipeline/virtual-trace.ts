import type { Context } from 'hono'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import type { JsonRpcMessage } from '../mcp/jsonrpc.js'
import { EVENT } from '../telemetry/events.js'
import { bodyWithTraceContext, setTraceHeaders } from '../telemetry/propagate.js'
import type { Outcome } from '../virtual/fan-out.js'
import { spanRequest } from './trace.js'

/**
 * Trace context and events for the member requests of a virtual server (docs/operations.md
 * "Virtual servers"): each member gets the gateway's span as parent in both places MCP carries it,
 * as a request through the member's own endpoint does (pipeline/proxy.ts). Without `telemetry:`
 * there is no trace on the request and every function here returns at its first line.
 */

/** The gateway span's `traceparent` / `tracestate`, starting the span if it is not yet. */
function propagationOf(c: Context<GatewayEnv>): Readonly<Record<string, string>> | undefined {
  const trace = c.get('trace')
  if (trace === undefined) return undefined
  trace.begin(spanRequest(c))
  return trace.propagation()
}

/**
 * A member's body with the gateway's context in `params._meta` (telemetry/propagate.ts).
 * `message` is the judged request the body was derived from (its cursor or name replaced, or a
 * read built from its `_meta`): the splice checks the text against it and declines on doubt.
 */
export function memberBody(c: Context<GatewayEnv>, body: Buffer, message: JsonRpcMessage): Buffer {
  const p = propagationOf(c)
  return p === undefined ? body : bodyWithTraceContext(body, message, p)
}

/** A member request's headers with the client's `traceparent` / `tracestate` replaced. */
export function memberTraceHeaders(c: Context<GatewayEnv>, headers: string[]): void {
  const p = propagationOf(c)
  if (p !== undefined) setTraceHeaders(headers, p)
}

/** The attempt callback of a routed call: the events the direct path records (pipeline/proxy.ts). */
export function memberAttempts(
  c: Context<GatewayEnv>,
): ((replica: string, retry: number) => void) | undefined {
  const trace = c.get('trace')
  return trace === undefined
    ? undefined
    : (replica, retry) => trace.event(EVENT.attempt, { 'mcp_edge.upstream.id': replica, retry })
}

/**
 * One event per member of a fan-out (discovery, a list page): its name and outcome, `ok` for an
 * answer (an error answer included), `timeout` past the fan-out deadline, else the reason code.
 */
export function memberEvents(
  c: Context<GatewayEnv>,
  method: string,
  members: readonly string[],
  outcomes: readonly Outcome<unknown>[],
): void {
  const trace = c.get('trace')
  if (trace === undefined) return
  outcomes.forEach((o, i) => {
    const outcome = o.ok
      ? 'ok'
      : o.timedOut
        ? 'timeout'
        : o.error instanceof GatewayError
          ? o.error.code
          : 'error'
    trace.event(EVENT.member, {
      'mcp_edge.member': members[i] ?? '',
      'mcp.method.name': method,
      outcome,
    })
  })
}
