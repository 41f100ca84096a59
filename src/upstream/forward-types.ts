/**
 * The contract between the attempt loop, the dispatch and their callers: one attempt's request and
 * how it ended. Answer transforms are protocol code's (mcp/body-transform.ts).
 */
import type { ExpectedId } from '../mcp/answer-scan.js'
import type { BodyTransform, HeaderMap } from '../mcp/body-transform.js'
import type { RequestDeadline } from './deadlines.js'
import type { StreamStop } from './lifecycle.js'
import type { Upstream } from './upstream.js'

/** One upstream attempt. */
export interface ForwardRequest {
  readonly upstream: Upstream
  readonly method: 'POST' | 'GET' | 'DELETE'
  readonly headers: readonly string[]
  readonly body: Buffer | null
  readonly headersTimeoutMs: number
  readonly bodyTimeoutMs: number
  /** Chooses a transform from the response head; undefined streams the body untouched. */
  readonly transform?:
    ((status: number, headers: HeaderMap) => BodyTransform | undefined) | undefined
  /**
   * The id the answer must carry (mcp/answer-scan.ts): a held 5xx with another is no answer to
   * this request, and an SSE stream that ends unanswered gets an error event with it.
   */
  readonly expected: ExpectedId
  /** Last look at the response headers before they are written (e.g. session id rewriting). */
  readonly onHeaders?: ((status: number, headers: HeaderMap) => void) | undefined
  /** For long-lived streams: ends the response at the next event boundary on drain. */
  readonly stop?: StreamStop | undefined
  /**
   * The request's own deadline (AttemptPlan.deadline): a streamed answer still running at it is
   * ended at an event boundary with an in-band `deadline_exceeded` error, and the request aborted.
   */
  readonly deadline?: RequestDeadline | undefined
  /**
   * For long-lived streams: once a streamed answer's head is written, forward() resolves with a
   * StreamHead and the end is reported here, once, instead. Nothing is retried after the head, so
   * the attempt is over; a held stream then carries only this handler (docs/design/hot-path.md
   * §Stream memory).
   */
  readonly onStreamEnd?: ((result: ForwardResult) => void) | undefined
}

/** How an attempt that reached the client ended. */
export type ForwardResult =
  | { readonly kind: 'done'; readonly status: number; readonly bytes: number }
  | { readonly kind: 'client_closed'; readonly status: number | undefined; readonly bytes: number }
  | {
      readonly kind: 'broken'
      readonly status: number
      readonly bytes: number
      readonly cause: Error
    }
  /** A stream that ended cleanly after its last complete event because the gateway is draining. */
  | { readonly kind: 'drained'; readonly status: number; readonly bytes: number }
  /** A streamed answer ended at the request's deadline with an in-band error (AttemptPlan.deadline). */
  | { readonly kind: 'deadline_exceeded'; readonly status: number; readonly bytes: number }

/**
 * A long-lived stream whose head is written, when the caller asked to hear of its end separately
 * (ForwardRequest.onStreamEnd): the attempt is over, whatever comes next is the stream itself.
 */
export interface StreamHead {
  readonly kind: 'streaming'
  readonly status: number
}
