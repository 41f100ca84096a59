import type { MiddlewareHandler } from 'hono'
import type { Attributes } from '@opentelemetry/api'
import type { GatewayEnv } from './env.js'
import { isRecord, parseMessage } from '../mcp/jsonrpc.js'
import { CACHEABLE_METHODS } from '../mcp/methods.js'
import { RequestTrace, type SpanRequest } from '../telemetry/request-trace.js'
import { EVENT, outcomeEvent } from '../telemetry/events.js'
import type { Tracing } from '../telemetry/tracing.js'
import type { Stage } from './chain.js'

/**
 * Second stage, only when `telemetry:` is configured: one server span per request (OpenTelemetry
 * MCP conventions), ended once the response is over, streams included. Without telemetry this
 * stage is not in the pipeline and no span or context object exists (docs/operations.md).
 */
export const traceRequest = (tracing: Tracing): MiddlewareHandler<GatewayEnv> =>
  async function traceRequest(c, next) {
    const t = new RequestTrace(
      tracing,
      performance.timeOrigin + performance.now(),
      c.env.incoming.headers,
    )
    c.set('trace', t)
    try {
      await next()
    } finally {
      const out = c.env.outgoing
      const status = out.headersSent ? out.statusCode : c.res.status
      // Started now at the latest, so that what the span needs of the request is read here and
      // the request (its parsed body) is not kept for as long as a stream lasts.
      t.begin(spanRequest(c))
      const end = (outcome: string, upstreamId: string | undefined): void => {
        const event = outcomeEvent(outcome)
        if (event !== undefined) t.event(event[0], event[1])
        t.end(outcome, status, upstreamId)
      }
      // A stream that outlives the stages ends its span at its own end (pipeline/proxy.ts).
      const ending = c.get('streamEnd')
      if (ending === undefined) end(c.get('outcome') ?? 'ok', c.get('upstreamId'))
      else ending.onEnd((e) => end(e.outcome, e.upstreamId))
    }
  }

/** An event once the stage before it let the request through (auth passed, policy allowed …). */
export const traceMark = (name: string, attributes: Attributes): Stage =>
  function traceMark(c, next) {
    c.get('trace')?.event(name, attributes)
    return next()
  }

/** Cache miss: the cache stage let a cacheable request through to the backend. */
export const traceCacheMiss = (): Stage =>
  function traceCacheMiss(c, next) {
    const method = c.get('mcp')?.method
    if (method !== undefined && CACHEABLE_METHODS.has(method))
      c.get('trace')?.event(EVENT.cache, { result: 'miss' })
    return next()
  }

/** What the span records, read from the stages' variables (closed sets and parsed values only). */
export function spanRequest(c: Parameters<MiddlewareHandler<GatewayEnv>>[0]): SpanRequest {
  const incoming = c.env.incoming
  const head = c.get('head')
  const mcp = c.get('mcp')
  return {
    mcp,
    meta: requestMeta(c),
    httpMethod: incoming.method,
    httpVersion: incoming.httpVersion,
    host: head?.host,
    localPort: incoming.socket.localPort,
    clientAddress: incoming.socket.remoteAddress,
    clientPort: incoming.socket.remotePort,
    sessionId: head?.sessionId,
    server: c.get('server')?.name,
    requestId: c.get('requestId'),
  }
}

/**
 * `params._meta` of the request, for `traceparent`. A body the gateway did not need to parse
 * (trusted headers) is parsed here, only for tracing, and only to read; a body that does not parse
 * has no parent from it.
 */
function requestMeta(
  c: Parameters<MiddlewareHandler<GatewayEnv>>[0],
): Readonly<Record<string, unknown>> | undefined {
  let message = c.get('mcp')?.message
  const body = c.get('body')
  if (message === undefined && body !== undefined && body.length > 0) {
    try {
      message = parseMessage(body, c.get('server')?.classify.maxDepth ?? 64)
    } catch {
      return undefined
    }
  }
  const meta = message?.params?.['_meta']
  return isRecord(meta) ? meta : undefined
}
