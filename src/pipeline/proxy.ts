import type { ServerResponse } from 'node:http'
import type { Context, MiddlewareHandler } from 'hono'
import { attemptEvents, propagationOf } from '../endpoint/call.js'
import { endpointOf, type Endpoints } from '../endpoint/endpoint.js'
import { isLongLived } from '../endpoint/plan.js'
import { outcomeOf, type Finished, type Seen, type Sent } from '../endpoint/send.js'
import { toGatewayError } from '../errors.js'
import type { ToolCatalog } from '../observability/tool-labels.js'
import { callOf } from './endpoint-call.js'
import type { GatewayEnv } from './env.js'
import { ALREADY_SENT } from './node-response.js'
import { StreamEnding } from './stream-ending.js'

/**
 * Last stage: sends the admitted request through its server's endpoint (endpoint/endpoint.ts
 * send: credentials, plan, attempt loop, books) and the answer back, written straight into Node's
 * response (docs/design/hot-path.md: web Response objects cost ~1.5x on this path). Which replicas,
 * and when another one is tried, is upstream/attempts.ts (docs/design/retries.md).
 */
export const proxy = (tools: ToolCatalog, endpoints: Endpoints): MiddlewareHandler<GatewayEnv> =>
  async function proxy(c) {
    // c.get, never the `var` getter: hono's getter copies every variable into a new object per access.
    const server = c.get('server')
    const call = callOf(c)
    const filter = c.get('listFilter')
    let observers = c.get('resultHooks') ?? []
    // Tool names for the metrics' closed label set, from the backend's own list (throttled), only
    // where the answer is read anyway (cache capture, policy filter): learning never changes how
    // an answer is relayed.
    if (call.mcp.method === 'tools/list' && (observers.length > 0 || filter !== undefined)) {
      const learn = tools.learner(server.name)
      if (learn !== undefined) observers = [...observers, learn]
    }
    const limits = c.get('runtime').config.limits
    const endpoint = endpointOf(endpoints, server.name)
    const opts = {
      propagation: propagationOf(call),
      observers,
      listFilter: filter,
      tasks: 'own' as const,
      maxInspectBytes: limits.maxInspectBytes,
      maxObservedBytes: c.get('runtime').config.cache?.maxEntryBytes,
      maxStreams: limits.maxStreamsPerPrincipal,
      onAttempt: attemptEvents(call),
    }
    if (isLongLived(call)) {
      // A stream's head: from then on the stream no longer needs the stages (StreamWatch below).
      const watch = new StreamWatch(c)
      const out = c.env.outgoing
      return watch.follow(endpoint.send(call, out, { ...opts, onStreamEnd: watch.end }, watch))
    }
    const seen: Seen = { upstream: undefined }
    try {
      const sent = await endpoint.send(call, c.env.outgoing, opts, seen)
      if (sent.kind === 'answer') return answered(c, sent)
      c.set('outcome', outcomeOf(sent.result))
      return ALREADY_SENT
    } finally {
      if (seen.upstream !== undefined) c.set('upstreamId', seen.upstream.id)
    }
  }

/** A request the endpoint answered in the server's name (a task this caller does not own). */
function answered(c: Context<GatewayEnv>, sent: { outcome: string; body: string }): Response {
  c.set('outcome', sent.outcome)
  return c.body(sent.body, 200, { 'content-type': 'application/json' })
}

/**
 * A long-lived stream (`subscriptions/listen`, a 2025-era GET). Until its head is written it is a
 * request like any other: an answer without a stream, or a failure, ends it here. Once the head is
 * written the attempt loop returns (sendWithRetries with `onStreamEnd`), the stages return, and
 * both let go of the request: its context, the plan, the header list, whose objects a stream held
 * for hours would otherwise carry (docs/design/hot-path.md §Stream memory). What must happen at the
 * end (the access line, a concurrency slot, the span) hangs on `streamEnd`, whose listeners hold
 * nothing of the context. The stream slot is given back when the stream ends, however it ends.
 *
 * Made outside the proxy stage's scope, and plain callbacks rather than a promise chain: a
 * closure made inside the stage would keep that stage's whole scope, the parsed request and its
 * context included (V8 gives one context to all closures of a scope), and every promise, reaction
 * and derived promise is held for as long as the stream is open.
 */
class StreamWatch implements Seen {
  readonly #ending = new StreamEnding()
  readonly #res: ServerResponse
  /** The request's context, until the head is written or the forward settles, whichever is first. */
  #c: Context<GatewayEnv> | undefined
  /** The replica last tried, told by the send (endpoint/send.ts), as the head is out at the latest. */
  upstream: Seen['upstream']
  /** The replica that answered, once the stream's head is out. */
  #upstreamId: string | undefined
  #answer: ((answer: Response) => void) | undefined
  #fail: ((err: unknown) => void) | undefined

  constructor(c: Context<GatewayEnv>) {
    this.#c = c
    this.#res = c.env.outgoing
  }

  /** The stage's answer: ALREADY_SENT once the head is written or the forward ends. */
  follow(forwarded: Promise<Sent>): Promise<Response> {
    // Callbacks of their own, not fields: once the promise settled, a held stream keeps neither.
    forwarded.then(
      (sent) =>
        sent.kind === 'answer'
          ? this.#answered(sent)
          : sent.result.kind === 'streaming'
            ? this.#head()
            : this.#ended(sent.result, undefined),
      (err: unknown) => this.#ended(undefined, err),
    )
    return new Promise((resolve, reject) => {
      this.#answer = resolve
      this.#fail = reject
    })
  }

  /** AttemptPlan.onStreamEnd: a stream whose head was written has ended. */
  readonly end = (result: Finished): void => this.#ended(result, undefined)

  /** Answered in the server's name before anything was sent. */
  #answered(sent: { outcome: string; body: string }): void {
    const c = this.#c
    const answer = this.#answer
    this.#release()
    if (c !== undefined) answer?.(answered(c, sent))
  }

  /** The head is written: the stages may return. */
  #head(): void {
    const c = this.#c
    if (c === undefined) return
    this.#upstreamId = this.upstream?.id
    c.set('streamEnd', this.#ending)
    const answer = this.#answer
    this.#release()
    answer?.(ALREADY_SENT)
  }

  /** The forward settled: with `result`, or failed with `err` (the send gave the slot back). */
  #ended(result: Finished | undefined, err: unknown): void {
    const c = this.#c
    if (c === undefined) {
      // Nothing fails once the head is out (the end comes with a result); should a bug make it,
      // the client cannot take a half stream for a whole one.
      if (result === undefined) this.#res.destroy()
      const outcome = result === undefined ? toGatewayError(err).code : outcomeOf(result)
      this.#ending.end({ outcome, upstreamId: this.#upstreamId })
      return
    }
    const upstreamId = this.upstream?.id
    if (upstreamId !== undefined) c.set('upstreamId', upstreamId)
    const answer = this.#answer
    const fail = this.#fail
    this.#release()
    if (result === undefined) fail?.(err)
    else {
      c.set('outcome', outcomeOf(result))
      answer?.(ALREADY_SENT)
    }
  }

  #release(): void {
    this.#c = undefined
    this.upstream = undefined
    this.#answer = undefined
    this.#fail = undefined
  }
}
