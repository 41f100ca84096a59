import type { MiddlewareHandler } from 'hono'
import type { AccessWriter } from '../observability/access-line.js'
import type { GatewayEnv } from '../env.js'
import { methodLabel, type GatewayMetrics } from '../observability/metrics.js'
import { errorType } from '../telemetry/error-type.js'

/**
 * Outermost stage: one JSON line per request once the response is over (streams included).
 * Only values from closed sets or verified fields are logged; never tokens or bodies.
 */
export const accessLog = (
  access: AccessWriter,
  metrics: GatewayMetrics,
): MiddlewareHandler<GatewayEnv> => {
  const write = access.write
  return async function accessLog(c, next) {
    const start = performance.now()
    try {
      await next()
    } finally {
      const mcp = c.get('mcp')
      const server = c.get('server')?.name ?? 'unknown'
      const method = methodLabel(mcp?.method ?? c.get('head')?.method)
      const status = c.env.outgoing.headersSent ? c.env.outgoing.statusCode : c.res.status
      const seconds = (performance.now() - start) / 1000
      const outcome = c.get('outcome') ?? 'ok'
      metrics.requests.record(server, method, outcome, status, seconds)
      // MCP operations only: a request refused before its method was known is not one.
      if (method !== 'none') {
        const target = mcp?.method === 'tools/call' ? mcp.targets[0] : undefined
        const tool = target?.kind === 'tool' ? metrics.tools.label(server, target.name) : undefined
        // mcp.version is one classify accepted (a closed set); undefined for header-less 2025 clients.
        metrics.operations.record(method, tool, mcp?.version, errorType(outcome, status), seconds)
      }
      if (write !== undefined) {
        const target = mcp?.targets[0]
        write({
          server: c.get('server')?.name,
          method: mcp?.method ?? c.get('head')?.method,
          name:
            target === undefined
              ? undefined
              : target.kind === 'resource'
                ? target.uri
                : target.name,
          era: mcp?.era,
          status,
          upstream: c.get('upstreamId'),
          outcome,
          ms: Math.round(seconds * 10_000) / 10,
        })
      }
    }
  }
}
