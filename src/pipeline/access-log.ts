import type { MiddlewareHandler } from 'hono'
import type { Logger } from 'pino'
import type { GatewayEnv } from '../env.js'

/**
 * Outermost stage: one JSON line per request once the response is over (streams included).
 * Only values from closed sets or verified fields are logged; never tokens or bodies.
 */
export const accessLog = (log: Logger): MiddlewareHandler<GatewayEnv> =>
  async function accessLog(c, next) {
    const start = performance.now()
    try {
      await next()
    } finally {
      if (log.isLevelEnabled('info')) {
        const mcp = c.var.mcp
        const target = mcp?.targets[0]
        log.info(
          {
            server: c.var.server?.name,
            method: mcp?.method ?? c.var.head?.method,
            name: target === undefined ? undefined : target.kind === 'resource' ? target.uri : target.name,
            era: mcp?.era,
            status: c.env.outgoing.headersSent ? c.env.outgoing.statusCode : c.res.status,
            upstream: c.var.upstreamId,
            outcome: c.var.outcome ?? 'ok',
            ms: Math.round((performance.now() - start) * 10) / 10,
          },
          'request',
        )
      }
    }
  }
