import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api'
import { ERRORS } from '../errors.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import { bounded } from '../observability/bound.js'
import { errorType } from './error-type.js'
import type { Tracing } from './tracing.js'

/** What the span needs from the request, gathered by the pipeline (no hono types here). */
export interface SpanRequest {
  readonly mcp: McpRequestInfo | undefined
  /** `params._meta` of the parsed body, when there is one. */
  readonly meta: Readonly<Record<string, unknown>> | undefined
  readonly httpMethod: string | undefined
  readonly httpVersion: string
  readonly host: string | undefined
  readonly localPort: number | undefined
  readonly clientAddress: string | undefined
  readonly clientPort: number | undefined
  readonly sessionId: string | undefined
  readonly server: string | undefined
  /** The request's id, on its access-log and audit lines too (pipeline/access-log.ts). */
  readonly requestId: string | undefined
}

/**
 * The server span of one request (OpenTelemetry semantic conventions for MCP, §Server spans). It is
 * started when the request is known well enough to name it (before forwarding, or at the end),
 * backdated to the request's arrival; what happened before that is kept as timed events.
 */
export class RequestTrace {
  private span: Span | undefined
  private context: Context | undefined
  private carried: Readonly<Record<string, string>> | undefined
  private readonly pending: [string, Attributes, number][] = []

  constructor(
    private readonly tracing: Tracing,
    /** Arrival time, epoch milliseconds. */
    private readonly startMs: number,
    /** W3C `traceparent` / `tracestate` request headers. */
    private readonly carrier: Readonly<Record<string, string | string[] | undefined>>,
  ) {}

  /** A timed event (auth passed, policy decision, cache hit or miss, upstream attempt). */
  event(name: string, attributes: Attributes): void {
    if (this.span !== undefined) this.span.addEvent(name, attributes)
    else this.pending.push([name, attributes, epochMs()])
  }

  /** Starts the span once (idempotent); later calls return the same one. */
  begin(req: SpanRequest): Span {
    if (this.span !== undefined) return this.span
    const parent = this.parentContext(req.meta)
    const span = this.tracing.tracer.startSpan(
      spanName(req),
      { kind: SpanKind.SERVER, startTime: this.startMs, attributes: spanAttributes(req) },
      parent,
    )
    for (const [name, attributes, at] of this.pending) span.addEvent(name, attributes, at)
    this.pending.length = 0
    this.span = span
    const own = trace.setSpan(ROOT_CONTEXT, span)
    // The client's baggage only with telemetry.propagateBaggage (tracing.ts); never its raw text.
    const baggage = this.tracing.baggage
    this.context =
      baggage === undefined ? own : baggage.extract(own, this.carrier, defaultTextMapGetter)
    return span
  }

  /**
   * `traceparent` (and `tracestate`) naming this request's span, for the upstream request
   * (W3C Trace Context §2.2, §3.3), in headers and `params._meta` alike. Call after begin();
   * computed once (a virtual server's member requests share it).
   */
  propagation(): Readonly<Record<string, string>> {
    if (this.carried !== undefined) return this.carried
    const out: Record<string, string> = {}
    if (this.context === undefined) return out
    this.tracing.propagator.inject(this.context, out, defaultTextMapSetter)
    this.tracing.baggage?.inject(this.context, out, defaultTextMapSetter)
    return (this.carried = out)
  }

  /**
   * Ends the span begun with begin() with the request's outcome and HTTP status. The request
   * itself is not needed any more: a stream's span ends long after its parsed body could go.
   */
  end(outcome: string, status: number, upstream: string | undefined): void {
    const span = this.span
    if (span === undefined) return
    const error = errorType(outcome, status)
    span.setAttribute('http.response.status_code', status)
    if (upstream !== undefined) span.setAttribute('mcp_edge.upstream.id', upstream)
    if (error !== undefined) {
      span.setAttribute('error.type', error)
      const spec = (ERRORS as Record<string, { rpc: number } | undefined>)[error]
      if (spec !== undefined) span.setAttribute('rpc.response.status_code', String(spec.rpc))
      span.setStatus({ code: SpanStatusCode.ERROR })
    }
    span.end()
  }

  /**
   * The parent: `params._meta.traceparent` (how MCP carries trace context, OpenTelemetry MCP
   * conventions §Context propagation) when the body has one, else the W3C request header.
   */
  private parentContext(meta: Readonly<Record<string, unknown>> | undefined): Context {
    const p = this.tracing.propagator
    if (typeof meta?.['traceparent'] === 'string') {
      const fromMeta = p.extract(
        ROOT_CONTEXT,
        { traceparent: meta['traceparent'], tracestate: stringOr(meta['tracestate']) },
        defaultTextMapGetter,
      )
      if (trace.getSpanContext(fromMeta) !== undefined) return fromMeta
    }
    return p.extract(ROOT_CONTEXT, this.carrier, defaultTextMapGetter)
  }
}

function epochMs(): number {
  return performance.timeOrigin + performance.now()
}

function stringOr(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined
}

/**
 * `{method} {target}` (`tools/call get_weather`), the target being the tool or prompt name; the
 * method alone otherwise; the HTTP method when no MCP method is known. Within the one bound
 * (observability/bound.ts): the SDK's span limits do not apply to names.
 */
function spanName(req: SpanRequest): string {
  const method = req.mcp?.method
  if (method === undefined) return bounded(req.httpMethod ?? 'mcp')
  const t = req.mcp?.targets[0]
  const target = t !== undefined && (t.kind === 'tool' || t.kind === 'prompt') ? t.name : undefined
  return bounded(target ? `${method} ${target}` : method)
}

/**
 * Span attributes per the MCP conventions; only values the gateway parsed or produced. SECURITY:
 * every value a client chose (method, names, URI, id, session id, Host) is cut to the one bound
 * (observability/bound.ts): a span holds them until it is exported.
 */
function spanAttributes(req: SpanRequest): Attributes {
  const mcp = req.mcp
  const a: Attributes = {
    'network.transport': 'tcp',
    'network.protocol.name': 'http',
    'network.protocol.version': req.httpVersion,
  }
  if (mcp?.method !== undefined) a['mcp.method.name'] = bounded(mcp.method)
  if (mcp?.version !== undefined) a['mcp.protocol.version'] = mcp.version
  const rawId = mcp?.message?.rawId
  if (rawId !== undefined) {
    a['jsonrpc.request.id'] = bounded(rawId.startsWith('"') ? String(JSON.parse(rawId)) : rawId)
    a['jsonrpc.protocol.version'] = '2.0'
  }
  const t = mcp?.targets[0]
  if (t?.kind === 'tool') {
    a['gen_ai.tool.name'] = bounded(t.name)
    a['gen_ai.operation.name'] = 'execute_tool'
  } else if (t?.kind === 'prompt') a['gen_ai.prompt.name'] = bounded(t.name)
  else if (t?.kind === 'resource') a['mcp.resource.uri'] = bounded(t.uri)
  // Sessions exist only in 2025-era traffic (spec 2025-11-25 §Session Management).
  if (mcp?.era === 'legacy' && req.sessionId !== undefined)
    a['mcp.session.id'] = bounded(req.sessionId)
  const host = hostName(req.host)
  if (host !== undefined) a['server.address'] = bounded(host)
  if (req.localPort !== undefined) a['server.port'] = req.localPort
  if (req.clientAddress !== undefined) a['client.address'] = req.clientAddress
  if (req.clientPort !== undefined) a['client.port'] = req.clientPort
  if (req.server !== undefined) a['mcp_edge.server'] = req.server
  // The gateway's own id, not a client value: it joins the span to the request's log lines.
  if (req.requestId !== undefined) a['mcp_edge.request.id'] = req.requestId
  return a
}

/** The host part of a Host header value (`[::1]:8080` → `::1`). */
function hostName(host: string | undefined): string | undefined {
  if (host === undefined || host === '') return undefined
  if (host.startsWith('[')) return host.slice(1, Math.max(1, host.indexOf(']')))
  const colon = host.lastIndexOf(':')
  return colon === -1 ? host : host.slice(0, colon)
}
