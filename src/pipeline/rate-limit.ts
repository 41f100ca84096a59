import type { MiddlewareHandler } from 'hono'
import type { Logger } from 'pino'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import type { Limiter, LimitVerdict } from '../limits/limiter.js'
import type { LimitKey } from '../limits/rules.js'
import { createAuditLog } from '../observability/audit.js'
import type { GatewayMetrics } from '../observability/metrics.js'

/**
 * Per-principal rate and concurrency limits (docs/rate-limits.md), right after policy and before
 * the cache, so a cache hit counts like any other answer. Over a limit: 429 with Retry-After and
 * the RateLimit fields, the request's id, nothing forwarded. Under it: the remaining quota on the
 * answer, from the decision itself. Mounted only when the policy files hold limits.
 */
export const rateLimit = (
  limiter: Limiter,
  log: Logger,
  metrics: GatewayMetrics,
): MiddlewareHandler<GatewayEnv> => {
  const audit = createAuditLog(log)
  return async function rateLimit(c, next) {
    const mcp = c.get('mcp')
    const principal = c.get('principal')
    const server = c.get('server').name
    const incoming = c.env.incoming
    const keyValue = (key: LimitKey): string => {
      switch (key.from) {
        case 'none':
          return ''
        case 'ip':
          return c
            .get('runtime')
            .clientAddress(
              incoming.socket.remoteAddress,
              scalar(incoming.headers['x-forwarded-for']),
            )
        case 'header':
          return present(scalar(incoming.headers[key.name]))
        case 'claim': {
          // Own claims only (a verified token's); a caller without the claim shares one bucket
          // with every other such caller, so leaving a claim out never escapes a limit.
          const claims = principal?.claims
          const v =
            claims !== undefined && Object.hasOwn(claims, key.name) ? claims[key.name] : undefined
          return present(typeof v === 'string' || typeof v === 'number' ? String(v) : undefined)
        }
      }
    }
    const decided = limiter.decide({
      server,
      caller: principal,
      method: mcp.method,
      targets: mcp.targets,
      keyValue,
    })
    const verdict: LimitVerdict = decided instanceof Promise ? await decided : decided
    const refused = verdict.refused
    if (refused !== undefined) {
      metrics.rateLimited.inc({ limit: refused.name })
      audit.rateLimited({
        caller: principal,
        server,
        method: mcp.method,
        limit: refused.name,
        key: keyText(refused.key),
        policy: c.get('runtime').policy?.id ?? '',
      })
      // SECURITY: refused here; the backend (and the cache) never see the request.
      throw new GatewayError('rate_limited', {
        detail: `limit "${refused.name}"`,
        data: { limit: refused.name },
        headers: verdict.headers,
      })
    }
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
}

/** A present value and a missing one never share a bucket, whatever the value. */
function present(value: string | undefined): string {
  return value === undefined ? '-' : `=${value}`
}

function scalar(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v
}

function keyText(key: LimitKey): string {
  return key.from === 'claim' || key.from === 'header' ? `${key.from}:${key.name}` : key.from
}
