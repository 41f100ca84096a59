import type { Context } from 'hono'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import { readRequestHead } from '../mcp/request-head.js'
import type { RuntimeRef } from '../runtime/ref.js'
import type { GatewayRuntime } from '../runtime/runtime.js'
import { corsResponseHeaders, preflightHeaders } from '../mcp/cors.js'
import type { Stage } from './chain.js'

/**
 * First stage for /mcp/<server>: refuses new work while draining, finds the server, then does the
 * checks that cost nothing (docs/design/check-order.md steps 1-5): method, Host, Origin, header
 * count, duplicates, `Connection` naming an owned header, declared body size. `runtime` is the
 * one this pipeline was built for (app.ts), so the stages a request runs through always match the
 * config it is judged by.
 */
export const frontDoor = (ref: RuntimeRef, runtime: GatewayRuntime): Stage =>
  function frontDoor(c, next) {
    if (ref.lifecycle.draining) throw new GatewayError('shutting_down')
    c.set('runtime', runtime)
    const incoming = c.env.incoming
    const name = c.req.param('server') ?? ''
    // A virtual server is judged by its `front` (runtime.ts), then answered by the virtual stage.
    const server = runtime.servers.get(name) ?? runtime.virtualServers.get(name)?.front
    // The server's own rules: which client headers its configured ones replace, which it owns.
    const head = readRequestHead(incoming.rawHeaders, server?.headerRules)
    c.set('head', head)
    if (server === undefined) throw new GatewayError('unknown_server')
    c.set('server', server)
    const method = incoming.method ?? ''
    if (method === 'OPTIONS') {
      const requested = incoming.headers['access-control-request-headers']
      return preflight(c, server.origins, head.origin, requested)
    }
    // 2026-07-28 is POST only; GET/DELETE survive only for 2025-era sessions (SH §Backward
    // Compatibility) on servers that still accept legacy clients.
    const legacySession =
      (method === 'GET' || method === 'DELETE') &&
      head.sessionId !== undefined &&
      server.config.legacyClients === 'allow'
    if (method !== 'POST' && !legacySession) {
      // A protected resource answers a request without credentials with its challenge, whatever
      // the method (RFC 6750 §3; spec 2026-07-28 basic/authorization): clients that probe with
      // GET learn where to sign in instead of a 405 that ends discovery. With a token, 405.
      const auth = runtime.auth?.servers.get(name)
      if (auth !== undefined && head.authorization === undefined) {
        throw new GatewayError('unauthenticated', {
          headers: { 'www-authenticate': auth.challenges.missing },
        })
      }
      throw new GatewayError('method_not_allowed')
    }
    // SECURITY: DNS-rebinding guard for local deployments (a rebound name still carries its own
    // Host; spec 2026-07-28 basic/transports/streamable-http §Security Warning).
    if (runtime.allowedHosts !== undefined && !runtime.allowedHosts.has(head.host ?? '')) {
      throw new GatewayError('host_not_allowed')
    }
    // SECURITY: spec MUST (SH §Security Warning): a present Origin that is not allowed gets 403.
    if (head.origin !== undefined) {
      if (!server.origins.has(head.origin)) throw new GatewayError('origin_not_allowed')
      // Set on the Node response, so every way of answering (proxy, cache, errors) carries it.
      for (const [k, v] of Object.entries(corsResponseHeaders(head.origin))) {
        c.env.outgoing.setHeader(k, v)
      }
    }
    if (head.count > runtime.config.limits.maxHeaderCount) {
      throw new GatewayError('too_many_headers')
    }
    // SECURITY: two copies of a routing or auth header can be read differently downstream.
    if (head.duplicate !== undefined) throw new GatewayError('duplicate_header', head.duplicate)
    // SECURITY: a header named in Connection is dropped on the way (RFC 9110 §7.6.1); if the
    // gateway judged or sets it, the backend would act on a request the gateway never judged.
    if (head.nominatesOwned !== undefined) {
      throw new GatewayError('connection_nominates_owned', head.nominatesOwned)
    }
    // Cheap rejections first (docs/design/check-order.md): an oversized declared body is refused
    // before authentication, so a 10 GiB upload without a token gets 413, not 401.
    const maxBody = runtime.config.limits.maxBodyBytes
    if (head.contentLength !== undefined && head.contentLength > maxBody) {
      throw new GatewayError('body_too_large', `limit is ${maxBody} bytes`)
    }
    return next()
  }

/** CORS preflight: 204 for an allowed origin asking for MCP headers, else 403 (never forwarded). */
function preflight(
  c: Context<GatewayEnv>,
  origins: ReadonlySet<string>,
  origin: string | undefined,
  requested: string | undefined,
): Response {
  // SECURITY: no Origin, or one not on the list, gets no CORS grant.
  if (origin === undefined || !origins.has(origin)) throw new GatewayError('origin_not_allowed')
  const headers = preflightHeaders(origin, requested)
  if (headers === undefined) {
    throw new GatewayError('origin_not_allowed', 'request headers not allowed')
  }
  c.set('outcome', 'preflight')
  return c.body(null, 204, headers)
}
