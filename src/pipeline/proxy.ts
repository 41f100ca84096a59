import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from '../env.js'
import { listFilterHook } from '../mcp/list-filter.js'
import { resultTransform, type ResultHook } from '../mcp/result-transform.js'
import { forward, UpstreamFailure, type BodyTransform, type ForwardRequest, type HeaderMap } from '../upstream/forward.js'
import type { Upstream } from '../upstream/upstream.js'

/**
 * Last stage: picks a replica and streams the request to it and the answer back, writing straight
 * into Node's response (performance.md: web Response objects cost ~1.5x on this path).
 * A replica that was never reached is replaced by another one, whatever the method.
 */
export const proxy = (): MiddlewareHandler<GatewayEnv> =>
  async function proxy(c) {
    const { server, head, body } = c.var
    const incoming = c.env.incoming
    const headers = [
      ...head.forward,
      ...server.upstreamHeaders,
      // SECURITY: the token exchanged for this backend (issue 3), never the caller's own.
      ...(c.var.upstreamAuthorization === undefined ? [] : ['authorization', c.var.upstreamAuthorization]),
      // SECURITY: gateway-owned identity headers; inbound copies were dropped (reliability S-20).
      'x-forwarded-for', incoming.socket.remoteAddress ?? '',
      'x-forwarded-proto', 'http',
      'x-forwarded-host', head.host ?? '',
    ]
    const timeouts = server.config.timeouts
    const filter = c.var.listFilter
    const hooks: readonly ResultHook[] | undefined =
      filter === undefined ? c.var.resultHooks : [...(c.var.resultHooks ?? []), listFilterHook(filter, c.var.mcp.method ?? '')]
    const maxInspect = c.var.runtime.config.limits.maxInspectBytes
    // Bodies are parsed on the way back only when a hook (list filter, cache capture) wants them.
    const transform =
      hooks === undefined || hooks.length === 0
        ? undefined
        : (status: number, h: HeaderMap): BodyTransform | undefined =>
            status === 200 ? resultTransform(String(h['content-type'] ?? ''), maxInspect, hooks) : undefined
    const tried = new Set<Upstream>()
    for (;;) {
      const upstream = server.pool.select({ exclude: tried })
      tried.add(upstream)
      c.set('upstreamId', upstream.id)
      const req: ForwardRequest = {
        upstream,
        method: incoming.method as 'POST' | 'GET' | 'DELETE',
        headers,
        body: incoming.method === 'POST' ? body : null,
        headersTimeoutMs: timeouts.responseHeadersMs,
        // Idle time between chunks, not total time: SSE keep-alive comments (every 15 s in the SDK)
        // keep subscriptions/listen and long tool calls open as long as both sides are alive.
        bodyTimeoutMs: timeouts.streamIdleMs,
        ...(transform === undefined ? {} : { transform }),
      }
      try {
        const result = await forward(c.env.outgoing, req)
        c.set('outcome', result.kind === 'done' ? 'ok' : result.kind)
        return RESPONSE_ALREADY_SENT
      } catch (err) {
        // reliability §4.1: NotSent is safe to replay on another replica for any method.
        if (err instanceof UpstreamFailure && !err.sent && tried.size < server.pool.upstreams.length) continue
        throw err
      }
    }
  }
