import type { ServerResponse } from 'node:http'
import { GatewayError } from '../errors.js'
import type { ServerBalancing } from './balancing.js'
import type { RequestDeadline } from './deadlines.js'
import { UpstreamFailure } from './failure.js'
import type { BodyTransform, HeaderMap } from '../mcp/body-transform.js'
import type { ExpectedId } from '../mcp/answer-scan.js'
import { forward } from './forward.js'
import type { ForwardResult, StreamHead } from './forward-types.js'
import type { StreamStop } from './lifecycle.js'
import { full, hasRoom, type UpstreamPool } from './pool.js'
import { backoffMs, RETRY_STATUSES } from './retry.js'
import type { HandleOwner } from './sessions.js'
import type { Upstream } from './upstream.js'

/** One request's way through the replicas (built by the proxy stage, read by the loop). */
export interface AttemptPlan {
  readonly pool: UpstreamPool
  /** The owner of a 2025-era session: the only replica this request may go to. */
  readonly pinned: Upstream | undefined
  /** Key for `balance: {hash}`; undefined falls back to least-request. */
  readonly hashKey: string | undefined
  /** A safe method (docs/design/retries.md): may be retried after it possibly reached a replica. */
  readonly safe: boolean
  /** 2025-era request: session ids in responses are rewritten to name their replica. */
  readonly legacy: boolean
  /** The caller a 2025-era session id is sealed for (undefined without auth). */
  readonly owner: HandleOwner | undefined
  readonly method: 'POST' | 'GET' | 'DELETE'
  readonly headers: readonly string[]
  readonly body: Buffer | null
  readonly transform:
    ((status: number, headers: HeaderMap) => BodyTransform | undefined) | undefined
  /** The id the answer must carry (ForwardRequest.expected). */
  readonly expected: ExpectedId
  readonly stop: StreamStop | undefined
  /**
   * The request's own deadline (`timeouts.methods`, `.tools`, `.prompts`): in place of the
   * server's responseHeadersMs for the head of every try, and for a streamed answer the end of
   * it (docs/balancing.md "Deadlines"). Undefined for most requests: they carry nothing for it.
   */
  readonly deadline?: RequestDeadline | undefined
  /**
   * Replaces the response-header hook (a virtual server's 2025-only member: its session id must
   * not reach the client, whatever the status); default: balancing's, or the session rewriter.
   */
  readonly onHeaders?: ((status: number, headers: HeaderMap) => void) | undefined
  /** Called before each try with the replica and the retries so far (tracing; else unset). */
  readonly onAttempt?: ((replica: string, retry: number) => void) | undefined
  /**
   * For a long-lived stream (`stop` set): the loop returns a StreamHead once the stream's head is
   * written, and the stream's end comes here, after the replica's books are closed
   * (ForwardRequest.onStreamEnd).
   */
  readonly onStreamEnd?: ((result: ForwardResult) => void) | undefined
  /** The replica of the latest attempt (for the access log). */
  upstream: Upstream | undefined
}

/**
 * The attempt loop, exactly per docs/design/retries.md:
 * - NotSent (refused, connect timeout …): another replica, for any method, until none is left;
 * - possibly sent (reset, timeout, garbage, 502/503/504 without a JSON-RPC body): one more replica
 *   (`retry.attempts`) only for safe methods, within the retry budget and the deadline (the
 *   response-headers timeout covers every try, as Envoy's route timeout includes its retries),
 *   after a full-jitter backoff;
 * - nothing is retried once a byte went to the client: forward() only rejects before that. So a
 *   stream with `plan.onStreamEnd` leaves the loop at its head: the loop, its budget and the plan
 *   are done with, and an idle stream holds none of them (docs/design/hot-path.md §Stream memory).
 */
export function sendWithRetries(
  res: ServerResponse,
  b: ServerBalancing,
  plan: AttemptPlan & { readonly onStreamEnd?: undefined },
): Promise<ForwardResult>
export function sendWithRetries(
  res: ServerResponse,
  b: ServerBalancing,
  plan: AttemptPlan,
): Promise<ForwardResult | StreamHead>
export async function sendWithRetries(
  res: ServerResponse,
  b: ServerBalancing,
  plan: AttemptPlan,
): Promise<ForwardResult | StreamHead> {
  const { budget, retry } = b
  // One deadline for every try (docs/design/retries.md §Bounds): the request's own when it has
  // one, else the server's response-head timeout.
  const own = plan.deadline
  const total = own === undefined ? b.headersTimeoutMs : own.ms
  const deadline = performance.now() + total
  if (own !== undefined) own.at = deadline
  // A per-try cap leaves room for another try; a deadline-bound call that is never retried once
  // sent gets all of its deadline.
  const perTry = own === undefined || plan.safe ? (retry.perTryTimeoutMs ?? total) : total
  let tried: Upstream[] | undefined
  let retries = 0
  let holding = false
  /** The latest failure that may have reached a replica (it answered garbage, reset, timed out). */
  let lastSent: UpstreamFailure | undefined
  const stream = plan.stop !== undefined
  budget.active++
  try {
    for (;;) {
      const upstream =
        plan.pinned === undefined
          ? pick(plan, tried, lastSent, stream)
          : pinnedReady(plan.pinned, stream)
      plan.upstream = upstream
      plan.onAttempt?.(upstream.id, retries)
      const left = deadline - performance.now()
      const headersTimeoutMs = Math.max(1, Math.min(perTry, left))
      // A long-lived stream counts against the replica's stream budget (maxStreams) for exactly
      // as long as it runs, however it ends: given back below, or by HeldStream once it ends.
      if (stream) upstream.streams++
      const held =
        stream && plan.onStreamEnd !== undefined
          ? new HeldStream(b, upstream, plan.onStreamEnd)
          : undefined
      try {
        const result = await forward(res, {
          upstream,
          method: plan.method,
          headers: plan.headers,
          body: plan.body,
          headersTimeoutMs,
          // Idle time between chunks, not total time: SSE keep-alive comments (every 15 s in the
          // SDK) keep subscriptions/listen and long tool calls open while both sides are alive.
          bodyTimeoutMs: b.streamIdleMs,
          transform: plan.transform,
          expected: plan.expected,
          onHeaders:
            plan.onHeaders ??
            (plan.legacy ? sessionRewriter(b, upstream, plan.owner) : b.onHeaders),
          stop: plan.stop,
          deadline: own,
          onStreamEnd: held?.end,
        })
        if (result.kind === 'streaming') return result // HeldStream closes the books
        if (stream) upstream.streams--
        b.settled(upstream, result)
        return result
      } catch (err) {
        if (stream) upstream.streams--
        if (!(err instanceof UpstreamFailure)) throw err
        if (own !== undefined && left <= perTry && isHeadTimeout(err)) {
          // The request's own deadline passed before the head: undici has already destroyed the
          // connection, so the backend sees the request cancelled, and nothing is retried.
          const passed = deadlineFailure(err)
          b.failed(upstream, passed)
          own.expired('head')
          throw passed
        }
        if (err.sent) lastSent = err
        b.failed(upstream, err)
        if (holding) {
          budget.release()
          holding = false
        }
        if (plan.pinned !== undefined) {
          // The session lives only there; if that replica is gone, so is the session (404 → the
          // client re-initialises, spec 2025-11-25 §Session Management).
          if (!err.sent)
            throw new GatewayError('session_not_found', 'the session is no longer available')
          throw err
        }
        ;(tried ??= []).push(upstream)
        if (!err.sent) {
          b.retried('not_sent')
          continue
        }
        if (!plan.safe || retries >= retry.attempts || !isRetryable(err)) throw err
        const wait = backoffMs(retry.backoffBaseMs, retries + 1)
        if (deadline - performance.now() - wait < 1) {
          b.retried('deadline')
          throw err
        }
        if (!budget.tryAcquire()) {
          b.retried('budget_exhausted')
          throw err
        }
        holding = true
        retries++
        b.retried('retried')
        await new Promise((resolve) => setTimeout(resolve, wait))
        if (res.destroyed) return { kind: 'client_closed', status: undefined, bytes: 0 }
      }
    }
  } finally {
    budget.active--
    if (holding) budget.release()
  }
}

/** A stream past its head: what its attempt owes the replica, paid when the stream ends. */
class HeldStream {
  constructor(
    private readonly b: ServerBalancing,
    private readonly upstream: Upstream,
    private readonly then: (result: ForwardResult) => void,
  ) {}

  readonly end = (result: ForwardResult): void => {
    this.upstream.streams--
    this.b.settled(this.upstream, result)
    this.then(result)
  }
}

/** undici gave up waiting for the response head (UND_ERR_HEADERS_TIMEOUT, upstream/failure.ts). */
function isHeadTimeout(f: UpstreamFailure): boolean {
  return (
    f.code === 'upstream_timeout' &&
    f.status === undefined &&
    causeCode(f) === 'UND_ERR_HEADERS_TIMEOUT'
  )
}

function causeCode(f: UpstreamFailure): unknown {
  const cause: unknown = f.cause
  return typeof cause === 'object' && cause !== null
    ? (cause as { code?: unknown }).code
    : undefined
}

/**
 * A request's own deadline passed: `deadline_exceeded`, not the replica's fault (a slow tool is
 * no unhealthy replica; its health is judged by the requests without one).
 */
function deadlineFailure(f: UpstreamFailure): UpstreamFailure {
  // SECURITY: replicaFault stays false: a caller that keeps calling a slow tool under a short
  // deadline must not get the replica ejected for everyone (docs/balancing.md "Health").
  return new UpstreamFailure('deadline_exceeded', { sent: true, cause: f.cause })
}

/** A failure worth another replica: the replica's own fault, and not a 500 it meant to send. */
function isRetryable(f: UpstreamFailure): boolean {
  return f.replicaFault && (f.status === undefined || RETRY_STATUSES.has(f.status))
}

/**
 * The next replica. When none is left after some tries, and none of them may have reached a
 * replica (all refused, unreachable or timed out connecting), nothing can take the request: 503
 * `no_upstream` with Retry-After, as when every replica is down (docs/balancing.md "Limits and
 * failing fast"). A replica that took the request and failed it (garbage, reset, timeout) stays
 * the answer: 502/504.
 */
function pick(
  plan: AttemptPlan,
  tried: readonly Upstream[] | undefined,
  lastSent: UpstreamFailure | undefined,
  stream: boolean,
): Upstream {
  try {
    return plan.pool.select(tried, plan.hashKey, stream)
  } catch (err) {
    if (tried === undefined || !(err instanceof GatewayError) || err.code !== 'no_upstream')
      throw err
    throw lastSent ?? new GatewayError('no_upstream', 'no replica could be reached')
  }
}

function pinnedReady(u: Upstream, stream: boolean): Upstream {
  // Health-checked down: the session is gone with it. Only ejected: tried anyway (it is the only
  // place the session exists).
  if (u.health.down)
    throw new GatewayError('session_not_found', 'the session is no longer available')
  if (!hasRoom(u, stream)) throw full(stream)
  return u
}

/**
 * Rewrites a backend-issued Mcp-Session-Id into a sealed one that names its replica and is bound
 * to the caller (docs/balancing.md "Legacy sessions").
 */
function sessionRewriter(
  b: ServerBalancing,
  upstream: Upstream,
  owner: HandleOwner | undefined,
): (status: number, h: HeaderMap) => void {
  return (status, h) => {
    b.onHeaders(status, h)
    const sid = h['mcp-session-id']
    if (sid === undefined) return
    const sealed = typeof sid === 'string' ? b.sessions.seal(upstream, sid, owner) : undefined
    // SECURITY: never relay an id we cannot seal; the backend's own id must not reach the client.
    if (sealed === undefined) delete h['mcp-session-id']
    else h['mcp-session-id'] = sealed
  }
}
