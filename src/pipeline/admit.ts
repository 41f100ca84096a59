import type { Context, Next } from 'hono'
import type { GatewayEnv } from './env.js'
import type { Admission } from '../endpoint/admit.js'
import { endpointOf, type Endpoints } from '../endpoint/endpoint.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import { methodNotFoundBody, peekRawId } from '../mcp/jsonrpc.js'
import { chainFilters } from '../mcp/list-filter.js'
import { renderDenial } from '../policy/denial.js'
import type { Stage } from './chain.js'

/**
 * A server's admission (endpoint/admit.ts): scopes, policy and limits, in the order of
 * docs/design/check-order.md, before the cache, so a cache hit is judged and counted like any
 * other answer. This stage only adapts hono's context: a denial is answered here as the server
 * answers an unknown target or method, and the backend receives nothing; list methods get the
 * caller's list filter; the RateLimit fields go on the answer, and concurrency slots are held
 * until the answer has ended. Always mounted: a skills answer is checked whatever else is
 * configured (mcp/skill-answers.ts); with none of `policies:`, `scopes:` or `limits:` admission
 * decides nothing else and costs no await.
 */
export const admitRequest = (endpoints: Endpoints): Stage =>
  function admit(c, next) {
    const incoming = c.env.incoming
    const endpoint = endpointOf(endpoints, c.get('server').name)
    // Written out: one literal per request, no EndpointCall (its span closure is the proxy's).
    const admission = endpoint.admit({
      http: incoming.method ?? '',
      requestId: c.get('requestId'),
      mcp: c.get('mcp'),
      principal: c.get('principal'),
      peer: incoming.socket.remoteAddress,
      headers: incoming.headers,
      trace: c.get('trace'),
    })
    // Decided synchronously (no limits, or refused): no await on the hot path.
    return admission instanceof Promise
      ? admission.then((a) => proceed(c, next, a))
      : proceed(c, next, admission)
  }

function proceed(
  c: Context<GatewayEnv>,
  next: Next,
  admission: Admission,
): Response | Promise<Response | void> {
  if (admission.kind === 'refused') return refuse(c, admission)
  if (admission.listFilter !== undefined)
    c.set('listFilter', chainFilters(admission.listFilter, c.get('listFilter')))
  const headers = admission.limitHeaders
  // Set on Node's response: every later writer (proxy, cache hit, an error) merges them in.
  if (headers !== undefined) {
    const out = c.env.outgoing
    for (const name in headers) out.setHeader(name, headers[name] as string)
  }
  const release = admission.release
  return release === undefined ? next() : holding(c, next, release)
}

async function holding(c: Context<GatewayEnv>, next: Next, release: () => void): Promise<void> {
  try {
    await next()
  } finally {
    // Held until the answer has ended, whichever way it ended: a stream that outlives the
    // stages gives it back at its own end (pipeline/proxy.ts).
    const ending = c.get('streamEnd')
    if (ending === undefined) release()
    else ending.onEnd(release)
  }
}

/** A denial, answered in the server's name (policy/denial.ts): nothing is forwarded. */
function refuse(c: Context<GatewayEnv>, refused: Admission & { kind: 'refused' }): Response {
  const mcp = c.get('mcp')
  if (refused.target === undefined) return methodNotFound(c, mcp, refused.outcome)
  c.set('outcome', refused.outcome)
  // A notification gets no answer (JSON-RPC 2.0 §4.1); 202 is what a server sends for one.
  if (mcp.kind === 'notification') return c.body(null, 202)
  const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
  const body = renderDenial(refused.target, rawId ?? 'null')
  return c.body(body, 200, { 'content-type': 'application/json' })
}

/**
 * What a server answers for a method it does not implement, with no gateway marker: 2026-07-28
 * servers HTTP 404 with -32601 (streamable-http §Error Handling); 2025-era servers -32601 in band
 * (JSON-RPC 2.0 §5.1), here as HTTP 200 JSON. A notification gets 202 and no body, as any server
 * answers one, whatever its method. Nothing is forwarded.
 */
function methodNotFound(c: Context<GatewayEnv>, mcp: McpRequestInfo, outcome: string): Response {
  c.set('outcome', outcome)
  const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
  // Unparsed (trusted-header mode): no readable id means no answer is expected.
  if (mcp.kind === 'notification' || (mcp.kind === 'unknown' && rawId === undefined))
    return c.body(null, 202)
  const status = mcp.era === 'modern' ? 404 : 200
  return c.body(methodNotFoundBody(rawId ?? 'null'), status, { 'content-type': 'application/json' })
}
