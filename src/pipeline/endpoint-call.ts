import type { Context } from 'hono'
import type { EndpointCall } from '../endpoint/call.js'
import type { SpanRequest } from '../telemetry/request-trace.js'
import type { GatewayEnv } from './env.js'
import { spanRequest } from './trace.js'

const NO_SPAN = (): SpanRequest => {
  throw new Error('no span without telemetry')
}

/** The judged request of a stage's context, as the endpoint core takes it (endpoint/call.ts). */
export function callOf(c: Context<GatewayEnv>): EndpointCall {
  const incoming = c.env.incoming
  const trace = c.get('trace')
  return {
    http: incoming.method as EndpointCall['http'],
    requestId: c.get('requestId'),
    mcp: c.get('mcp'),
    head: c.get('head'),
    body: c.get('body'),
    principal: c.get('principal'),
    peer: incoming.socket.remoteAddress,
    headers: incoming.headers,
    trace,
    // No closure per request without `telemetry:` (no span is started then).
    span: trace === undefined ? NO_SPAN : () => spanRequest(c),
  }
}
