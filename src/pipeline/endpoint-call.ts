import type { Context } from 'hono'
import type { EndpointCall } from '../endpoint/call.js'
import type { GatewayEnv } from './env.js'
import { spanRequest } from './trace.js'

/** The judged request of a stage's context, as the endpoint core takes it (endpoint/call.ts). */
export function callOf(c: Context<GatewayEnv>): EndpointCall {
  const incoming = c.env.incoming
  return {
    http: incoming.method as EndpointCall['http'],
    mcp: c.get('mcp'),
    head: c.get('head'),
    body: c.get('body'),
    principal: c.get('principal'),
    peer: incoming.socket.remoteAddress,
    headers: incoming.headers,
    trace: c.get('trace'),
    span: () => spanRequest(c),
  }
}
