import type { MiddlewareHandler } from 'hono'
import { classify } from '../mcp/classify.js'
import { methodNotFoundBody } from '../mcp/jsonrpc.js'
import type { VirtualRuntime } from '../runtime/runtime.js'
import { trustedCall, UNREAD_CALL } from '../virtual/handle-calls.js'
import { HANDLERS } from '../virtual/handlers.js'
import { virtualListen } from '../virtual/listen.js'
import type { VirtualDeps, VirtualOutcome, VirtualRequest } from '../virtual/request.js'
import { headersFor } from '../virtual/route.js'
import { callOf } from './endpoint-call.js'
import type { GatewayEnv } from './env.js'
import { respond, virtualContext } from './virtual-answer.js'
import { legacyFront, sessionOf } from './virtual-legacy.js'

/**
 * Last stage for /mcp/<virtual>, in place of policy, cache and proxy: the request has been judged
 * exactly as for a server (front door, authentication, strict parsing and header checks); the
 * virtual server's handlers (src/virtual/handlers.ts) then reach every member through the member's
 * own path, under its own policy (docs/virtual-servers.md, docs/design/member-path.md). This stage
 * only adapts: the 2025-era front, listen streams, and hono's context to a VirtualRequest.
 */
export const virtualStage = (deps: VirtualDeps): MiddlewareHandler<GatewayEnv> =>
  async function virtual(c) {
    const runtime = c.get('runtime')
    const v = runtime.virtualServers.get(c.get('server').name) as VirtualRuntime
    const ctx = virtualContext(c)
    // 2025-era clients: the gateway holds their session; what is left is a 2026-07-28 request.
    const legacy =
      c.get('mcp').era === 'legacy'
        ? await legacyFront(c, v, deps.log, {
            cache: deps.cache,
            headersFor: headersFor(callOf(c), ctx.auth, c.get('principal')),
            endpoints: deps.endpoints,
          })
        : undefined
    if (legacy?.kind === 'answered') return legacy.response
    const out: VirtualOutcome = { outcome: undefined, upstreamId: undefined }
    const call = callOf(c)
    const session = sessionOf(c)
    const principal = c.get('principal')
    const res = c.env.outgoing
    let mcp = c.get('mcp')
    if (mcp.kind === 'unknown' && mcp.era === 'modern') {
      // A body the front did not parse (some member has `trustHeaders: true`): a tools/call to
      // such a member is judged on its headers, as on that member's own endpoint; any other
      // request is parsed now, exactly as a front that parses every body would have.
      // prettier-ignore
      const unread: VirtualRequest = {
        v, deps, ctx, call, session, res, out, principal, message: UNREAD_CALL,
        method: 'tools/call',
        rawId: 'null', // never read on this path: a denial peeks the id, errors do (app.ts)
        text: '', // forwardTo: the client's body, unchanged
      }
      const answered = trustedCall(unread, mcp)
      if (answered !== undefined) return respond(c, out, await answered)
      mcp = classify(c.get('head'), c.get('body'), { ...v.front.classify, parseAlways: true })
      c.set('mcp', mcp)
    }
    const message = mcp.message
    // Notifications (cancelled, progress) name no member; accepted as any server accepts them.
    if (message === undefined || message.kind !== 'request' || message.rawId === undefined) {
      c.set('outcome', 'accepted')
      return c.body(null, 202)
    }
    const method = message.method as string
    const rawId = message.rawId
    if (method === 'subscriptions/listen') {
      const headers = headersFor(call, ctx.auth, principal)
      // prettier-ignore
      const listen = {
        v, ctx, call, res, out, principal, log: deps.log, cache: deps.cache, message, rawId,
        headersFor: headers, endpoints: deps.endpoints,
      }
      return respond(c, out, await virtualListen(listen))
    }
    // spec 2025-11-25 server/utilities/logging: `initialize` passes on the members' `logging`
    // capability, so a 2025-era client may set a level (the Inspector does so on connect). The
    // gateway relays members' log messages only within the answers they belong to, so the level
    // is accepted and nothing is forwarded: no member session is opened for it.
    if (legacy !== undefined && method === 'logging/setLevel') {
      c.set('outcome', 'ok')
      const body = `{"jsonrpc":"2.0","id":${rawId},"result":{}}`
      return c.body(body, 200, { 'content-type': 'application/json' })
    }
    const handler = HANDLERS[method]
    if (handler === undefined) {
      c.set('outcome', 'method_not_found')
      // As a server answers it (pipeline/admit.ts): 404 on 2026-07-28 (streamable-http §Error
      // Handling), in band for a 2025-era client, which takes a 404 for a lost session.
      const status = legacy === undefined ? 404 : 200
      return c.body(methodNotFoundBody(rawId), status, { 'content-type': 'application/json' })
    }
    // prettier-ignore
    const r: VirtualRequest = {
      v, deps, ctx, call, session, res, out, principal, message, method, rawId,
      text: c.get('body').toString('utf8'),
    }
    const answered = respond(c, out, await handler(r))
    return legacy === undefined ? answered : legacy.finish(answered)
  }
