import type { ServerResponse } from 'node:http'
import type { Dispatcher } from 'undici'
import { GatewayError, type ErrorCode } from '../errors.js'
import { HOP_BY_HOP } from '../mcp/headers.js'
import { peekRawId } from '../mcp/jsonrpc.js'
import { SseFramer } from './sse-framing.js'
import type { Upstream } from './upstream.js'

/** Rewrites a response body on its way to the client (list filtering, cache capture). */
export interface BodyTransform {
  /** true for SSE: headers go out at once and output is written as it comes. */
  readonly streaming: boolean
  push(chunk: Buffer): Buffer | undefined
  /** Final bytes; may throw GatewayError when the body turned out unusable (buffered mode only). */
  end(): Buffer | undefined
}

/** Response headers as undici reports them and Node writes them. */
export type HeaderMap = Record<string, string | string[] | undefined>

/** One upstream attempt. */
export interface ForwardRequest {
  readonly upstream: Upstream
  readonly method: 'POST' | 'GET' | 'DELETE'
  readonly headers: readonly string[]
  readonly body: Buffer | null
  readonly headersTimeoutMs: number
  readonly bodyTimeoutMs: number
  /** Chooses a transform from the response head; undefined streams the body untouched. */
  readonly transform?: (status: number, headers: HeaderMap) => BodyTransform | undefined
  /** Last look at the response headers before they are written (e.g. session id rewriting). */
  readonly onHeaders?: (status: number, headers: HeaderMap) => void
}

/** How an attempt that reached the client ended. */
export type ForwardResult =
  | { readonly kind: 'done'; readonly status: number; readonly bytes: number }
  | { readonly kind: 'client_closed'; readonly status: number | undefined; readonly bytes: number }
  | { readonly kind: 'broken'; readonly status: number; readonly bytes: number; readonly cause: Error }

/**
 * An attempt that failed before a single byte went to the client, so it can still be answered
 * with a gateway error or retried. `sent` says whether the request may have reached the replica
 * (reliability.md §4.1: NotSent vs PossiblyAccepted).
 */
export class UpstreamFailure extends GatewayError {
  constructor(
    code: ErrorCode,
    readonly sent: boolean,
    readonly status: number | undefined,
    cause: unknown,
  ) {
    super(code, undefined, undefined, { cause })
  }
}

// Errors raised before the request could have been written to the replica.
const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED',
])
// SECURITY: per-user or auth-bearing response headers never cross the gateway (reliability S-24,
// B-17): a backend challenge would point the client at the backend's authorization server.
const DROPPED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP, 'set-cookie', 'www-authenticate', 'content-length',
])

class ClientClosed extends Error {
  override readonly name = 'ClientClosed'
}

/**
 * Sends one request to `req.upstream` and streams the answer into `res` without buffering (SSE is
 * written event by event as it arrives; spec streamable-http §Sending Messages). Resolves once the
 * response is over; rejects with UpstreamFailure only when nothing was written to the client yet.
 */
export function forward(res: ServerResponse, req: ForwardRequest): Promise<ForwardResult> {
  return new Promise((resolve, reject) => {
    const handler = new ProxyHandler(res, req, resolve, reject)
    req.upstream.inFlight++
    req.upstream.dispatcher.dispatch(
      {
        origin: req.upstream.origin,
        path: req.upstream.path,
        method: req.method,
        headers: req.headers as string[],
        body: req.body,
        headersTimeout: req.headersTimeoutMs,
        bodyTimeout: req.bodyTimeoutMs,
      },
      handler,
    )
  })
}

class ProxyHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined
  private transform: BodyTransform | undefined
  /** Set for untransformed SSE: only whole events reach the client (B-08). */
  private framer: SseFramer | undefined
  private status: number | undefined
  private headers: HeaderMap | undefined
  private headWritten = false
  private bytes = 0
  private settled = false
  private readonly onClose = (): void => {
    // SECURITY/spec: closing the response stream is cancellation (streamable-http §Cancellation);
    // the upstream request is aborted at once so the backend stops work.
    if (!this.res.writableFinished) this.controller?.abort(new ClientClosed('client closed'))
  }
  private readonly onDrain = (): void => this.controller?.resume()

  constructor(
    private readonly res: ServerResponse,
    private readonly req: ForwardRequest,
    private readonly resolve: (r: ForwardResult) => void,
    private readonly reject: (e: UpstreamFailure) => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.res.destroyed) {
      controller.abort(new ClientClosed('client closed before dispatch'))
      return
    }
    this.res.on('close', this.onClose)
    this.res.on('drain', this.onDrain)
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: HeaderMap): void {
    // The gateway's own credentials were refused: a config fault, not the client's business.
    if (status === 401 || status === 407) {
      this.fail(new UpstreamFailure('upstream_bad_response', true, status, new Error(`upstream answered ${status}`)))
      controller.abort(new Error('upstream refused the gateway credentials'))
      return
    }
    this.status = status
    const out: HeaderMap = {}
    for (const key in headers) if (!DROPPED_RESPONSE_HEADERS.has(key)) out[key] = headers[key]
    const streaming = String(headers['content-type'] ?? '').startsWith('text/event-stream')
    if (streaming) out['x-accel-buffering'] = 'no'
    this.transform = this.req.transform?.(status, out)
    if (streaming && this.transform === undefined) this.framer = new SseFramer()
    if (this.transform === undefined && !streaming && headers['content-length'] !== undefined) {
      out['content-length'] = headers['content-length']
    }
    this.headers = out
    this.req.onHeaders?.(status, out)
    if (this.transform === undefined || this.transform.streaming) this.writeHead(streaming)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return
    let out: Buffer | undefined = chunk
    if (this.framer !== undefined) out = this.framer.push(chunk)
    else if (this.transform !== undefined) {
      try {
        out = this.transform.push(chunk)
      } catch (err) {
        this.failTransform(controller, err)
        return
      }
    }
    if (out !== undefined && out.length > 0) this.write(controller, out)
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    if (this.settled) return
    if (this.transform !== undefined) {
      let out: Buffer | undefined
      try {
        out = this.transform.end()
      } catch (err) {
        this.failTransform(controller, err)
        return
      }
      if (!this.headWritten) {
        if (this.headers !== undefined && out !== undefined) this.headers['content-length'] = String(out.length)
        this.writeHead(false)
      }
      if (out !== undefined && out.length > 0) this.write(controller, out)
    }
    this.finish()
    this.res.end(this.unansweredStreamEvent())
    this.resolve({ kind: 'done', status: this.status ?? 0, bytes: this.bytes })
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.settled) return
    this.finish()
    if (err instanceof ClientClosed) {
      this.resolve({ kind: 'client_closed', status: this.status, bytes: this.bytes })
      return
    }
    if (!this.headWritten) {
      this.reject(classifyFailure(err, this.status))
      return
    }
    // An SSE stream that broke between events, before its answer, still gets a well-formed final
    // error event: clients (the v2 SDK among them) otherwise wait out their own request timeout.
    const event = this.unansweredStreamEvent()
    if (event !== undefined) {
      this.res.end(event)
      this.resolve({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: err })
      return
    }
    // Otherwise the only honest signal left is a broken connection, so a half-written JSON body
    // is never presented as complete (reliability B-07).
    this.res.destroy()
    this.resolve({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: err })
  }

  /**
   * A final JSON-RPC error event for an SSE stream that ended (or broke between events) without
   * answering its request; undefined when it did answer, or when there is no id to answer.
   */
  private unansweredStreamEvent(): string | undefined {
    if (this.framer === undefined || this.framer.sawResponse || this.req.body === null) return undefined
    const id = peekRawId(this.req.body, 64)
    if (id === undefined) return undefined
    return `event: message\ndata: {"jsonrpc":"2.0","id":${id},"error":{"code":-31502,"message":"Upstream stream ended before the response","data":{"source":"gateway","reason":"upstream_stream_broken"}}}\n\n`
  }

  private writeHead(flush: boolean): void {
    this.headWritten = true
    this.res.writeHead(this.status ?? 502, this.headers as Record<string, string | string[]>)
    if (flush) this.res.flushHeaders()
  }

  private write(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.length
    if (!this.res.write(chunk)) controller.pause()
  }

  private failTransform(controller: Dispatcher.DispatchController, err: unknown): void {
    const failure =
      err instanceof UpstreamFailure ? err : new UpstreamFailure('upstream_bad_response', true, this.status, err)
    if (this.headWritten) {
      this.finish()
      this.res.destroy()
      this.resolve({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: failure })
    } else this.fail(failure)
    controller.abort(failure)
  }

  private fail(failure: UpstreamFailure): void {
    if (this.settled) return
    this.finish()
    this.reject(failure)
  }

  private finish(): void {
    this.settled = true
    this.req.upstream.inFlight--
    this.res.off('close', this.onClose)
    this.res.off('drain', this.onDrain)
  }
}

function classifyFailure(err: Error, status: number | undefined): UpstreamFailure {
  const code = (err as { code?: string }).code ?? ''
  if (NOT_SENT_CODES.has(code)) return new UpstreamFailure('upstream_unavailable', false, status, err)
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new UpstreamFailure('upstream_timeout', true, status, err)
  }
  if (code === 'UND_ERR_RESPONSE_STATUS_CODE' || code.startsWith('HPE_')) {
    return new UpstreamFailure('upstream_bad_response', true, status, err)
  }
  return new UpstreamFailure('upstream_unavailable', true, status, err)
}
