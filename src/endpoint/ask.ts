import type { ServerConfig } from '../config/schema.js'
import { GatewayError } from '../errors.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import type { RequestHead } from '../mcp/request-head.js'
import { sendWithRetries } from '../upstream/attempts.js'
import type { Upstream } from '../upstream/upstream.js'
import type { EndpointCall } from './call.js'
import { CollectingResponse } from './collect.js'
import { planAttempt, type PlanOptions, type PlanServer } from './plan.js'

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
    const planned = planAttempt(server, call, {
      ...opts,
      tasks: opts.tasks ?? 'none',
      maxStreams: Infinity,
      rewriters: [...(opts.rewriters ?? []), collect],
      anyStatus: true,
    })
    if (planned.kind === 'answer') {
      const parsed = JSON.parse(planned.body) as Record<string, unknown>
      return { status: 200, message: parsed }
    }
    const plan = planned.plan
    const result = await sendWithRetries(sink.asResponse(), server.balancing, plan)
    if (result.kind !== 'done' || message === undefined) {
      if (sink.destroyed) throw new GatewayError('upstream_timeout', 'fan-out deadline')
      throw new GatewayError('upstream_bad_response', `server ${server.name}: no answer`)
    }
    const sid = sink.headers['mcp-session-id']
    return {
      status: result.status,
      message,
      sessionId: typeof sid === 'string' ? sid : undefined,
      upstream: plan.upstream,
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}

const NO_PRINCIPAL_HEADERS = Object.freeze({})

/**
 * A request the gateway makes of a server on its own account (the catalog's probe, `mcp-edge
 * pin`): what a 2026-07-28 client sends (spec basic/transports/streamable-http), and no client
 * behind it, so no X-Forwarded-For either; the server's configured headers are added by the plan.
 */
export function ownRequest(method: string, body: Buffer, rawId: string): EndpointCall {
  // prettier-ignore
  const forward = [
    'content-type', 'application/json',
    'accept', 'application/json, text/event-stream',
    'mcp-protocol-version', '2026-07-28',
    'mcp-method', method,
  ]
  const head: RequestHead = {
    version: '2026-07-28',
    method,
    name: undefined,
    sessionId: undefined,
    origin: undefined,
    host: undefined,
    authorization: undefined,
    contentType: 'application/json',
    contentLength: body.length,
    contentEncoding: undefined,
    duplicate: undefined,
    nominatesOwned: undefined,
    count: forward.length / 2,
    forward,
  }
  const mcp: McpRequestInfo = {
    era: 'modern',
    version: '2026-07-28',
    method,
    kind: 'request',
    targets: [],
    verified: true,
    message: { kind: 'request', method, params: undefined, rawId },
  }
  return {
    http: 'POST',
    mcp,
    head,
    body,
    principal: undefined,
    peer: undefined,
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
    }),
  }
}
