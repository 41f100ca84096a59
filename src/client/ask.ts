import { randomBytes, randomInt, randomUUID } from 'node:crypto'
import type { ServerConfig } from '../config/schema.js'
import { GatewayError } from '../errors.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import { parseMessage } from '../mcp/jsonrpc.js'
import { MODERN_VERSION } from '../mcp/protocol.js'
import type { RequestHead } from '../mcp/request-head.js'
import { locate } from '../mcp/rewrite.js'
import type { Upstream } from '../upstream/upstream.js'
import type { EndpointCall } from '../endpoint/call.js'
import { CollectingResponse } from './collect.js'
import type { PlanOptions, PlanServer } from '../endpoint/plan.js'
import { sendPlanned, type Seen } from '../endpoint/send.js'
import { modernEnvelope } from '../mcp/outbound.js'

/** What a server is to a read (a ServerRuntime has all of it). */
export interface AskServer extends PlanServer {
  readonly config: ServerConfig
}

/** A server's final JSON-RPC response (a result or an error), and its HTTP status. */
export interface ServerAnswer {
  readonly status: number
  readonly message: Record<string, unknown>
  /** The server's `Mcp-Session-Id` response header (a 2025-era server's `initialize`). */
  readonly sessionId?: string | undefined
  /** The replica that answered. */
  readonly upstream?: Upstream | undefined
}

/** How a read is planned (endpoint/plan.ts), and when it stops waiting. */
export type AskOptions = Omit<PlanOptions, 'tasks' | 'maxStreams' | 'anyStatus' | 'onStreamEnd'> & {
  readonly tasks?: PlanOptions['tasks'] | undefined
  /**
   * A stream streamed to a client (client/era.ts streamInEra) counts against that caller's
   * stream budget; a read the gateway makes for itself has none.
   */
  readonly maxStreams?: number | undefined
  /** Stops waiting (a fan-out deadline): the request is aborted as on a client close. */
  readonly signal?: AbortSignal | undefined
}

/**
 * Sends `call` to `server` exactly as its endpoint would (planAttempt, then its attempt loop:
 * replicas, retries, health, ejection) and reads the final response whole instead of relaying it:
 * a virtual server's member reads, the catalog's probes, `mcp-edge pin`. The answer is read by the
 * same bounded, id-checked reader as a filtered answer (mcp/result-transform.ts), JSON or SSE
 * alike. Throws GatewayError / UpstreamFailure when the server fails, answers something that is
 * not the response to this request, or is abandoned.
 */
export async function ask(
  server: AskServer,
  call: EndpointCall,
  opts: AskOptions,
): Promise<ServerAnswer> {
  const sink = new CollectingResponse()
  const signal = opts.signal
  if (signal?.aborted === true) throw new GatewayError('upstream_timeout', 'fan-out deadline')
  const onAbort = (): void => sink.abandon()
  signal?.addEventListener('abort', onAbort, { once: true })
  let message: Record<string, unknown> | undefined
  const collect = (m: Record<string, unknown>): undefined => {
    message = m
    return undefined
  }
  try {
    const seen: Seen = { upstream: undefined }
    const sent = await sendPlanned(
      server,
      call,
      sink.asResponse(),
      {
        ...opts,
        tasks: opts.tasks ?? 'none',
        maxStreams: Infinity,
        rewriters: [...(opts.rewriters ?? []), collect],
        anyStatus: true,
      },
      seen,
    )
    if (sent.kind === 'answer') {
      const parsed = JSON.parse(sent.body) as Record<string, unknown>
      return { status: 200, message: parsed }
    }
    const result = sent.result
    if (result.kind !== 'done' || message === undefined) {
      if (sink.destroyed) throw new GatewayError('upstream_timeout', 'fan-out deadline')
      throw new GatewayError('upstream_bad_response', `server ${server.name}: no answer`)
    }
    const sid = sink.headers['mcp-session-id']
    return {
      status: result.status,
      message,
      sessionId: typeof sid === 'string' ? sid : undefined,
      upstream: seen.upstream,
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}

const NO_PRINCIPAL_HEADERS = Object.freeze({})

/**
 * How the gateway's own reads present themselves (config `ownRequests`, compiled by
 * catalog/config.ts): as a client's request through the gateway does, so that a backend cannot
 * tell a pin or a probe from a client and show it the reviewed text only (docs/catalog.md §The
 * gateway's own reads).
 */
export interface OwnIdentity {
  /** `clientInfo` of the request envelope, or of `initialize` for a 2025-era server. */
  readonly clientInfo: { readonly name: string; readonly version: string }
  readonly clientCapabilities: Readonly<Record<string, unknown>>
  /** The client's own headers, [name, value, …], as the gateway forwards a client's. */
  readonly headers: readonly string[]
  /** The client address X-Forwarded-For names. */
  readonly address: string
  /** The host X-Forwarded-Host names: the gateway, as clients name it. */
  readonly host: string
  /** Share of requests whose trace context is sampled, or undefined without `telemetry:`. */
  readonly sampleRatio: number | undefined
}

/**
 * A fresh JSON-RPC id for one of the gateway's own requests. SDK clients send integers counting
 * from 0 per connection; a fixed id, or one counting from a known start, would mark the request
 * as the gateway's. SECURITY: drawn from a CSPRNG over the range such counters reach.
 */
function ownRequestId(): string {
  return String(randomInt(0, 65_536))
}

/** The `_meta` envelope of a 2026-07-28 request (mcp/outbound.ts), as the client sends it. */
function ownEnvelope(as: OwnIdentity): Record<string, unknown> {
  return modernEnvelope(as.clientInfo, as.clientCapabilities)
}

/**
 * A 2026-07-28 request body with the envelope, members in the order the official client writes
 * them; its id is a placeholder, which ownRequest replaces.
 */
export function ownModernBody(
  method: string,
  params: Readonly<Record<string, unknown>>,
  as: OwnIdentity,
): Buffer {
  const p = JSON.stringify({ ...params, _meta: ownEnvelope(as) })
  return Buffer.from(`{"method":${JSON.stringify(method)},"jsonrpc":"2.0","id":0,"params":${p}}`)
}

/**
 * Trace context for an own request, when the gateway sends some on every request (`telemetry:`):
 * a new trace, sampled at the configured ratio, as a client's request that starts one gets.
 */
export function ownPropagation(as: OwnIdentity): Readonly<Record<string, string>> | undefined {
  if (as.sampleRatio === undefined) return undefined
  const sampled = randomInt(0, 1_000_000) < as.sampleRatio * 1_000_000
  const trace = randomBytes(16).toString('hex')
  const span = randomBytes(8).toString('hex')
  return { traceparent: `00-${trace}-${span}-${sampled ? '01' : '00'}` }
}

/**
 * A request the gateway makes of a server on its own account (the catalog's probe, `mcp-edge
 * pin`), sent as a client's request through the gateway is: a fresh random id in place of the
 * body's (ownRequestId), the headers a 2026-07-28 client sends (spec basic/transports/
 * streamable-http) with the configured client's own, and the gateway-owned X-Forwarded-* for the
 * configured client address (endpoint/headers.ts adds them from `peer` and `host`). The server's
 * configured headers are added by the plan, and replace any of the client's by that name, as for a
 * client's request (readRequestHead drops them).
 */
export function ownRequest(server: AskServer, body: Buffer, as: OwnIdentity): EndpointCall {
  let bytes = body
  let message = parseMessage(body, server.classify.maxDepth)
  if (message.kind === 'request') {
    const text = body.toString('utf8')
    const span = locate(text, ['id'])
    if (span === undefined) throw new Error('an own request without one id')
    const rawId = ownRequestId()
    bytes = Buffer.from(text.slice(0, span[0]) + rawId + text.slice(span[1]), 'utf8')
    message = { ...message, rawId }
  }
  const method = message.method as string
  const configured = new Set<string>()
  for (let i = 0; i < server.upstreamHeaders.length; i += 2)
    configured.add((server.upstreamHeaders[i] as string).toLowerCase())
  // prettier-ignore
  const forward = [
    'mcp-protocol-version', MODERN_VERSION,
    'mcp-method', method,
    'content-type', 'application/json',
    'accept', 'application/json, text/event-stream',
  ]
  for (let i = 0; i < as.headers.length; i += 2)
    if (!configured.has((as.headers[i] as string).toLowerCase()))
      forward.push(as.headers[i] as string, as.headers[i + 1] as string)
  const head: RequestHead = {
    version: MODERN_VERSION,
    method,
    name: undefined,
    sessionId: undefined,
    origin: undefined,
    host: as.host,
    authorization: undefined,
    contentType: 'application/json',
    contentLength: bytes.length,
    contentEncoding: undefined,
    duplicate: undefined,
    nominatesOwned: undefined,
    count: forward.length / 2,
    forward,
  }
  const mcp: McpRequestInfo = {
    era: 'modern',
    version: MODERN_VERSION,
    method,
    kind: message.kind === 'notification' ? 'notification' : 'request',
    targets: [],
    verified: true,
    message,
  }
  return {
    http: 'POST',
    // A request of the gateway's own: an id of its own (nothing judges or audits it).
    requestId: randomUUID(),
    mcp,
    head,
    body: bytes,
    principal: undefined,
    peer: as.address,
    headers: NO_PRINCIPAL_HEADERS,
    trace: undefined,
    // Never called: a request without a trace starts no span.
    span: () => ({
      mcp,
      meta: undefined,
      httpMethod: 'POST',
      httpVersion: '1.1',
      host: undefined,
      localPort: undefined,
      clientAddress: undefined,
      clientPort: undefined,
      sessionId: undefined,
      server: undefined,
      requestId: undefined,
    }),
  }
}
