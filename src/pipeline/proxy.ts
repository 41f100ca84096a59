import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from '../env.js'
import { listFilterHook } from '../mcp/list-filter.js'
import { resultTransform, type ResultHook } from '../mcp/result-transform.js'
import { GatewayError } from '../errors.js'
import { sendWithRetries } from '../upstream/attempts.js'
import type { BodyTransform, HeaderMap } from '../upstream/forward.js'
import { RETRY_SAFE_METHODS } from '../upstream/retry.js'
import type { Upstream } from '../upstream/upstream.js'

/**
 * Last stage: picks a replica and streams the request to it and the answer back, writing straight
 * into Node's response (performance.md: web Response objects cost ~1.5x on this path). Which
 * replicas, and when another one is tried, is upstream/attempts.ts (reliability.md §4.1).
 */
export const proxy = (): MiddlewareHandler<GatewayEnv> =>
  async function proxy(c) {
    // c.get, never the `var` getter: hono's getter copies every variable into a new object per access.
    const server = c.get('server')
    const head = c.get('head')
    const body = c.get('body')
    const mcp = c.get('mcp')
    const incoming = c.env.incoming
    const auth = c.get('upstreamAuthorization')
    // prettier-ignore
    const headers = [
      ...head.forward,
      ...server.upstreamHeaders,
      // SECURITY: the token exchanged for this backend (issue 3), never the caller's own.
      ...(auth === undefined ? [] : ['authorization', auth]),
      // SECURITY: gateway-owned identity headers; inbound copies were dropped (reliability S-20).
      'x-forwarded-for', incoming.socket.remoteAddress ?? '',
      'x-forwarded-proto', 'http',
      'x-forwarded-host', head.host ?? '',
    ]
    const filter = c.get('listFilter')
    const observers = c.get('resultHooks') ?? []
    const limits = c.get('runtime').config.limits
    // A policy filter rewrites the answer, so it must see all of it (bounded: 502 beyond). Hooks
    // that only look (cache capture) let the answer stream untouched and skip what is too large.
    const rewrite = filter !== undefined
    const hooks: readonly ResultHook[] = rewrite
      ? [...observers, listFilterHook(filter, mcp.method ?? '')]
      : observers
    const maxInspect = rewrite
      ? limits.maxInspectBytes
      : Math.min(limits.maxInspectBytes, c.get('runtime').config.cache?.maxEntryBytes ?? Infinity)
    const transform =
      hooks.length === 0
        ? undefined
        : (status: number, h: HeaderMap): BodyTransform | undefined =>
            status === 200
              ? resultTransform(String(h['content-type'] ?? ''), maxInspect, hooks, rewrite ? 'rewrite' : 'observe')
              : undefined
    const b = server.balancing
    const method = incoming.method as 'POST' | 'GET' | 'DELETE'
    // 2025-era sessions live on one replica; the id the client holds says which (issue 5 §7).
    // 2026-07-28 traffic has no sessions and never gets any of this.
    const legacy = mcp.era === 'legacy'
    let pinned
    if (legacy && head.sessionId !== undefined) {
      const session = b.sessions.open(head.sessionId)
      // SECURITY: unknown, malformed or tampered ids are refused, never guessed at; the 404 makes
      // the client start a new session (spec 2025-11-25 §Session Management).
      if (session === undefined) throw new GatewayError('session_not_found')
      pinned = session.replica
      setHeader(headers, 'mcp-session-id', session.sessionId)
    }
    const hash = b.hash
    const hashKey =
      hash === undefined
        ? undefined
        : hash.from === 'header'
          ? scalar(incoming.headers[hash.name])
          : scalar(c.get('principal')?.claims[hash.name]) // no principal without auth: least-request
    const stream = mcp.method === 'subscriptions/listen' || method === 'GET'
    const stop = stream ? b.lifecycle.openStream() : undefined
    const plan = {
      pool: b.poolFor(mcp.targets),
      pinned,
      hashKey,
      safe: mcp.kind !== 'notification' && RETRY_SAFE_METHODS.has(mcp.method ?? ''),
      legacy,
      method,
      headers,
      body: method === 'POST' ? body : null,
      transform,
      stop,
      upstream: undefined as Upstream | undefined,
    }
    try {
      const result = await sendWithRetries(c.env.outgoing, b, plan)
      c.set('outcome', result.kind === 'done' ? 'ok' : result.kind)
      return RESPONSE_ALREADY_SENT
    } finally {
      if (plan.upstream !== undefined) c.set('upstreamId', plan.upstream.id)
      if (stop !== undefined) b.lifecycle.closeStream(stop)
    }
  }

/** Replaces the value of header `name` (lower-case) in a [name, value, …] list. */
function setHeader(headers: string[], name: string, value: string): void {
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] as string).toLowerCase() === name) headers[i + 1] = value
  }
}

/** A hash key from a header or claim value: strings and numbers only, else none. */
function scalar(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined
}
