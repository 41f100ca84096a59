import type { MiddlewareHandler } from 'hono'
import { admit, limitedMethod, type LimitDeps } from '../endpoint/limit.js'
import type { GatewayEnv } from './env.js'

/**
 * Per-principal rate and concurrency limits (endpoint/limit.ts), right after policy and before the
 * cache, so a cache hit counts like any other answer. Under a limit: the remaining quota on the
 * answer, from the decision itself. Mounted only when the policy files hold limits.
 */
export const rateLimit = (deps: LimitDeps): MiddlewareHandler<GatewayEnv> =>
  async function rateLimit(c, next) {
    const mcp = c.get('mcp')
    const incoming = c.env.incoming
    const req = {
      principal: c.get('principal'),
      peer: incoming.socket.remoteAddress,
      headers: incoming.headers,
      method: limitedMethod(incoming.method, mcp.method),
    }
    const verdict = await admit(deps, req, c.get('server').name, mcp.targets)
    // Set on Node's response: every later writer (proxy, cache hit, an error) merges them in.
    const out = c.env.outgoing
    for (const name in verdict.headers) out.setHeader(name, verdict.headers[name] as string)
    const release = verdict.release
    if (release === undefined) return next()
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
