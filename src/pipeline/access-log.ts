import { randomUUID } from 'node:crypto'
import type { MiddlewareHandler } from 'hono'
import type { AccessWriter } from '../observability/access-line.js'
import type { GatewayEnv } from './env.js'
import { methodLabel, type GatewayMetrics } from '../observability/metrics.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import { errorType } from '../telemetry/error-type.js'

/**
 * Outermost stage: one JSON line per request once the response is over (streams included).
 * Only values from closed sets or verified fields are logged; never tokens or bodies. It gives the
 * request its id, which its audit lines and span carry too (docs/operations.md "Request ids"):
 * the gateway's own, never a client header, so a client cannot make its request look like another.
 */
export const accessLog = (
  access: AccessWriter,
  metrics: GatewayMetrics,
): MiddlewareHandler<GatewayEnv> => {
  const write = access.write
  const record = (seen: Seen, outcome: string, upstream: string | undefined): void => {
    const seconds = (performance.now() - seen.start) / 1000
    const { server, method, mcp, requestId } = seen
    const label = methodLabel(method)
    metrics.requests.record(server ?? 'unknown', label, outcome, seen.status, seconds)
    // MCP operations only: a request refused before its method was known is not one.
    if (label !== 'none') {
      const target = mcp?.method === 'tools/call' ? mcp.targets[0] : undefined
      const tool =
        target?.kind === 'tool' ? metrics.tools.label(server ?? 'unknown', target.name) : undefined
      // mcp.version is one classify accepted (a closed set); undefined for header-less 2025 clients.
      const error = errorType(outcome, seen.status)
      metrics.operations.record(server ?? 'unknown', label, tool, mcp?.version, error, seconds)
    }
    if (write !== undefined) {
      const target = mcp?.targets[0]
      write({
        requestId,
        server,
        method,
        name:
          target === undefined ? undefined : target.kind === 'resource' ? target.uri : target.name,
        era: mcp?.era,
        status: seen.status,
        upstream,
        outcome,
        ms: Math.round(seconds * 10_000) / 10,
      })
    }
  }
  return async function accessLog(c, next) {
    const start = performance.now()
    const requestId = randomUUID()
    c.set('requestId', requestId)
    try {
      await next()
    } finally {
      const out = c.env.outgoing
      const mcp = c.get('mcp')
      const ending = c.get('streamEnd')
      const seen: Seen = {
        start,
        requestId,
        server: c.get('server')?.name,
        method: mcp?.method ?? c.get('head')?.method,
        status: out.headersSent ? out.statusCode : c.res.status,
        // A stream outliving the stages keeps only what the line needs, not the parsed body.
        mcp:
          ending === undefined || mcp === undefined
            ? mcp
            : { method: mcp.method, targets: mcp.targets, version: mcp.version, era: mcp.era },
      }
      if (ending === undefined) record(seen, c.get('outcome') ?? 'ok', c.get('upstreamId'))
      else ending.onEnd((end) => record(seen, end.outcome, end.upstreamId))
    }
  }
}

/** What the line and the metrics need of a request, read once the stages are done. */
interface Seen {
  readonly start: number
  readonly requestId: string
  readonly server: string | undefined
  readonly method: string | undefined
  readonly status: number
  readonly mcp: Pick<McpRequestInfo, 'method' | 'targets' | 'version' | 'era'> | undefined
}
