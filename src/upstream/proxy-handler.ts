import type { ServerResponse } from 'node:http'
import type { Dispatcher } from 'undici'
import { GatewayError, renderError } from '../errors.js'
import type { RequestDeadline } from './deadlines.js'
import { classifyFailure, UpstreamFailure } from './failure.js'
import { bodyKind, type BodyTransform, type HeaderMap } from '../mcp/body-transform.js'
import type { ForwardRequest, ForwardResult, StreamHead } from './forward-types.js'
import { HeldBody } from './held-body.js'
import { relayedHeaders } from './response-head.js'
import { unansweredEvent } from '../mcp/sse-answer.js'
import { AnswerScan, answerProblem, type ExpectedId } from '../mcp/answer-scan.js'
import type { Upstream } from './upstream.js'

/** A settled promise's resolvers, kept by a held stream in place of the real ones. */
function settledAlready(): void {}

class ClientClosed extends Error {
  override readonly name = 'ClientClosed'
}
class Drained extends Error {
  override readonly name = 'Drained'
}
class DeadlinePassed extends Error {
  override readonly name = 'DeadlinePassed'
}

/** undici dispatch handler writing one upstream answer straight into Node's response. */
export class ProxyHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined
  /**
   * The reader of a JSON or SSE answer (mcp/result-transform.ts): every one is at least checked
   * to be the answer to this request; SSE reaches the client in whole events only
   * (docs/balancing.md §Retries). Other bodies (an empty 202, a 4xx page) are relayed as they come.
   */
  private transform: BodyTransform | undefined
  /**
   * A 5xx answer held (up to 64 KiB) before anything is written: a JSON-RPC body is relayed as is,
   * anything else rejects with UpstreamFailure(status) so the attempt loop can retry it or answer
   * 502 (docs/balancing.md §Retries: a backend's well-formed JSON-RPC error is never replaced).
   */
  private held: HeldBody | undefined
  private status: number | undefined
  private headers: HeaderMap | undefined
  private headWritten = false
  /** A 2xx of unknown length and no usable content type: refused if any body byte arrives. */
  private untyped = false
  private bytes = 0
  private settled = false
  /**
   * The one listener every request needs. The others are made only when used: `drain` on the
   * first refused write, the gateway-drain hook only for streams (each is a closure and a
   * listener every request, and every held stream, would otherwise carry; docs/design/hot-path.md).
   */
  private readonly onClose = (): void => {
    // SECURITY/spec: closing the response stream is cancellation (streamable-http §Cancellation);
    // the upstream request is aborted at once so the backend stops work.
    if (!this.res.writableFinished) this.controller?.abort(new ClientClosed('client closed'))
  }
  private onDrain: (() => void) | undefined
  /** Ends a streamed answer at the request's own deadline; set only for such a request. */
  private deadlineTimer: NodeJS.Timeout | undefined
  private readonly upstream: Upstream
  private readonly expected: ExpectedId
  /** The request, until a stream's head is out; the fields needed after it are copied above. */
  private req: ForwardRequest | undefined
  /** Set once forward() resolved at a stream's head: the end goes here (ForwardRequest.onStreamEnd). */
  private streamEnd: ((result: ForwardResult) => void) | undefined

  constructor(
    private readonly res: ServerResponse,
    req: ForwardRequest,
    private resolve: (r: ForwardResult | StreamHead) => void,
    private reject: (e: UpstreamFailure) => void,
  ) {
    this.req = req
    this.upstream = req.upstream
    this.expected = req.expected
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.res.destroyed) {
      controller.abort(new ClientClosed('client closed before dispatch'))
      return
    }
    this.res.on('close', this.onClose)
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: HeaderMap,
  ): void {
    const req = this.req
    if (req === undefined) return // one final head per answer, and a held stream had it
    // The gateway's own credentials were refused: a config fault, not the client's business.
    if (status === 401 || status === 407) {
      this.fail(
        new UpstreamFailure('upstream_bad_response', {
          sent: true,
          status,
          cause: new Error(`upstream answered ${status}`),
        }),
      )
      controller.abort(new Error('upstream refused the gateway credentials'))
      return
    }
    // SECURITY: a redirect is never followed (undici dispatch follows none) and never relayed: it
    // would send the client, and the token it presents, around the gateway. A misconfigured
    // backend, not a transient fault: no retry, and the replica's health is not charged
    // (docs/balancing.md §Health).
    if (status >= 300 && status < 400) {
      this.fail(
        new UpstreamFailure('upstream_redirect', {
          sent: true,
          status,
          cause: new Error(`upstream answered ${status}`),
        }),
      )
      controller.abort(new Error('upstream redirect refused'))
      return
    }
    this.status = status
    // undici's controller keeps the raw header Buffers (views into the socket's first read) for
    // handlers that want them; this one never does, and a held stream would carry them, and the
    // read buffer behind them, for its whole life (docs/design/hot-path.md §Stream memory).
    ;(controller as { rawHeaders?: unknown }).rawHeaders = null
    const out = relayedHeaders(headers)
    this.headers = out
    if (status >= 500) {
      this.held = new HeldBody()
      return
    }
    // Judged on the relayed headers: a Content-Type the backend nominated in Connection is gone.
    const kind = bodyKind(out['content-type'])
    if (status < 300 && kind !== 'json' && kind !== 'sse') {
      // SECURITY: a 2xx body is an MCP answer only as JSON or SSE (spec streamable-http §Sending
      // Messages); anything else (an HTML page, a download) is refused. A 2xx without a body (a
      // 202 accepting a notification, a 204) is fine, so an unknown length is judged on the first byte.
      const length = headers['content-length']
      if (status !== 204 && length !== undefined && length !== '0') {
        this.fail(this.badContentType())
        controller.abort(new Error('upstream content type refused'))
        return
      }
      this.untyped = status !== 204 && length === undefined
    }
    const streaming = kind === 'sse'
    if (streaming) out['x-accel-buffering'] = 'no'
    const transform = req.transform?.(status, out)
    this.transform = transform
    // The backend's Content-Length holds while its bytes are relayed as they are.
    if (!streaming && (transform === undefined || transform.exact === true)) {
      const length = headers['content-length']
      if (length !== undefined) out['content-length'] = length
    }
    req.onHeaders?.(status, out)
    // A non-streaming reader holds the head until its first output, so its verdict on a short
    // answer can still be a 502 (mcp/json-answer.ts).
    if (!this.untyped && (transform === undefined || transform.streaming)) this.writeHead(streaming)
    if (transform?.streaming === true) {
      req.stop?.onStop(() => this.stopAtBoundary())
      if (req.deadline !== undefined && this.headWritten) this.armDeadline(req.deadline)
      if (this.headWritten && req.onStreamEnd !== undefined) this.streamHead(req.onStreamEnd)
    }
  }

  /**
   * A stream's head is out and its caller hears of the end separately: the attempt is over. The
   * request (header list, hooks) and the promise's resolvers are let go; what an idle stream holds
   * for hours is this handler.
   */
  private streamHead(onEnd: (result: ForwardResult) => void): void {
    const resolve = this.resolve
    this.streamEnd = onEnd
    this.req = undefined
    this.resolve = settledAlready
    this.reject = settledAlready
    resolve({ kind: 'streaming', status: this.status ?? 0 })
  }

  /** How the answer ended: forward()'s result, or a held stream's end. */
  private done(result: ForwardResult): void {
    const end = this.streamEnd
    if (end === undefined) return this.resolve(result)
    this.streamEnd = undefined
    end(result)
  }

  /** Gateway drain: everything written so far is whole events (the SSE reader), so end here. */
  private stopAtBoundary(): void {
    if (this.settled || !this.headWritten) return
    this.finish()
    this.res.end()
    this.done({ kind: 'drained', status: this.status ?? 0, bytes: this.bytes })
    this.controller?.abort(new Drained('gateway draining'))
  }

  /**
   * A request's own deadline covers its whole streamed answer (docs/balancing.md "Deadlines"):
   * armed when the head is out, in a scope of its own so the timer holds only this handler.
   */
  private armDeadline(deadline: RequestDeadline): void {
    const left = Math.max(0, deadline.at - performance.now())
    this.deadlineTimer = setTimeout(() => this.deadlinePassed(deadline), left)
  }

  /**
   * The deadline passed mid-stream: everything written so far is whole events (the SSE reader),
   * so the stream ends here with the request's error event, as a drain ends one, and the upstream
   * request is aborted (its connection closed: the backend sees the cancellation).
   */
  private deadlinePassed(deadline: RequestDeadline): void {
    this.deadlineTimer = undefined
    if (this.settled) return
    const answered = this.transform?.answered !== false
    this.finish()
    this.res.end(answered ? undefined : deadlineEvent(this.expected))
    const kind = answered ? 'done' : 'deadline_exceeded'
    this.done({ kind, status: this.status ?? 0, bytes: this.bytes })
    if (!answered) deadline.expired('stream')
    this.controller?.abort(new DeadlinePassed('request deadline passed'))
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return
    if (this.untyped && chunk.length > 0) {
      this.fail(this.badContentType())
      controller.abort(new Error('upstream content type refused'))
      return
    }
    if (this.held !== undefined) {
      if (!this.held.push(chunk)) {
        this.fail(this.serverError('5xx body too large to inspect'))
        controller.abort(new Error('5xx body too large'))
      }
      return
    }
    let out: Buffer | undefined = chunk
    if (this.transform !== undefined) {
      try {
        out = this.transform.push(chunk)
      } catch (err) {
        this.failTransform(controller, err)
        return
      }
    }
    if (out !== undefined && out.length > 0) {
      // A transform that holds its head (JSON) and then starts relaying: chunked from here on.
      if (!this.headWritten) this.writeHead(false)
      this.write(controller, out)
    }
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    if (this.settled) return
    if (this.held !== undefined) return this.endHeld(this.held)
    let out: Buffer | undefined
    if (this.transform !== undefined) {
      try {
        out = this.transform.end()
      } catch (err) {
        this.failTransform(controller, err)
        return
      }
      if (!this.headWritten && this.headers !== undefined && out !== undefined)
        this.headers['content-length'] = String(out.length)
    }
    if (!this.headWritten) this.writeHead(false) // held by the reader, or an untyped empty 2xx
    this.finish()
    const tail = this.unansweredStreamEvent()
    // One write for the usual single-chunk answer: its bytes go out with the end.
    if (out !== undefined && out.length > 0) {
      this.bytes += out.length
      if (tail !== undefined) this.res.write(out)
      else {
        this.res.end(out)
        return this.done({ kind: 'done', status: this.status ?? 0, bytes: this.bytes })
      }
    }
    this.res.end(tail)
    this.done({ kind: 'done', status: this.status ?? 0, bytes: this.bytes })
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.settled) return
    this.finish()
    if (err instanceof ClientClosed) {
      this.done({ kind: 'client_closed', status: this.status, bytes: this.bytes })
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
      this.done({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: err })
      return
    }
    // Otherwise the only honest signal left is a broken connection, so a half-written JSON body
    // is never presented as complete (docs/balancing.md §Retries).
    this.res.destroy()
    this.done({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: err })
  }

  /** The final error event owed by an SSE stream that ended without answering, if any. */
  private unansweredStreamEvent(): string | undefined {
    const t = this.transform
    if (t === undefined || !t.streaming || t.answered !== false) return
    return unansweredEvent(this.expected)
  }

  /**
   * A held 5xx: relayed when it is a JSON-RPC message (the backend's answer) that answers this
   * request, else a failure.
   */
  private endHeld(held: HeldBody): void {
    const body = held.message()
    if (body === undefined) return this.fail(this.serverError('5xx without a JSON-RPC body'))
    const scan = new AnswerScan()
    scan.push(body)
    const problem = answerProblem(scan.end(), this.expected, this.status ?? 502)
    // SECURITY: another request's answer is no answer to this one, whatever its status.
    if (problem !== undefined)
      return this.fail(
        new UpstreamFailure(problem, {
          sent: true,
          status: this.status,
          cause: new Error(`5xx answer refused: ${problem}`),
        }),
      )
    if (this.headers !== undefined) this.headers['content-length'] = String(body.length)
    this.req?.onHeaders?.(this.status ?? 502, this.headers ?? {})
    this.writeHead(false)
    this.bytes += body.length
    this.finish()
    this.res.end(body)
    this.done({ kind: 'done', status: this.status ?? 0, bytes: this.bytes })
  }

  private badContentType(): UpstreamFailure {
    const type = this.headers?.['content-type']
    return new UpstreamFailure('upstream_bad_content_type', {
      sent: true,
      status: this.status,
      cause: new Error(
        `upstream answered ${this.status} with content type ${String(type ?? '(none)')}`,
      ),
    })
  }

  private serverError(why: string): UpstreamFailure {
    const code = this.status === 504 ? 'upstream_timeout' : 'upstream_bad_response'
    return new UpstreamFailure(code, {
      sent: true,
      status: this.status,
      cause: new Error(`${why} (status ${this.status})`),
      replicaFault: true,
    })
  }

  private writeHead(flush: boolean): void {
    this.headWritten = true
    this.res.writeHead(this.status ?? 502, this.headers as Record<string, string | string[]>)
    // Node has serialised them; a held stream need not carry the map.
    this.headers = undefined
    if (flush) this.res.flushHeaders()
  }

  private write(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.res.write(chunk)) return
    // The client reads slower than the backend writes: stop reading upstream until it catches up,
    // first letting go of anyone waiting on this answer (mcp/body-transform.ts `stalled`).
    this.transform?.stalled?.()
    controller.pause()
    if (this.onDrain === undefined) {
      this.onDrain = () => this.controller?.resume()
      this.res.on('drain', this.onDrain)
    }
  }

  private failTransform(controller: Dispatcher.DispatchController, err: unknown): void {
    const failure =
      err instanceof UpstreamFailure
        ? err
        : new UpstreamFailure(err instanceof GatewayError ? err.code : 'upstream_bad_response', {
            sent: true,
            status: this.status,
            cause: err,
            // A refusal's detail (which skill limit, which pinned file) still reaches the client.
            detail: err instanceof GatewayError ? err.detail : undefined,
          })
    if (this.headWritten) {
      this.finish()
      this.res.destroy()
      this.done({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: failure })
    } else this.fail(failure)
    controller.abort(failure)
  }

  private fail(failure: UpstreamFailure): void {
    if (this.settled) return
    this.finish()
    // Only before any byte went out, so never on a held stream. Should it happen, the client cannot
    // take a half stream for a whole one, and the end is still reported, or its slot would never
    // be given back.
    if (this.streamEnd !== undefined) {
      this.res.destroy()
      this.done({ kind: 'broken', status: this.status ?? 0, bytes: this.bytes, cause: failure })
    } else this.reject(failure)
  }

  private finish(): void {
    this.settled = true
    this.upstream.inFlight--
    this.res.off('close', this.onClose)
    if (this.onDrain !== undefined) this.res.off('drain', this.onDrain)
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer)
  }
}

/** The final error event of a streamed answer cut at its deadline; none for a request without id. */
function deadlineEvent(expected: ExpectedId): string | undefined {
  if (typeof expected !== 'string') return undefined
  const body = renderError(new GatewayError('deadline_exceeded'), expected).body
  return `event: message\ndata: ${body}\n\n`
}
