import type { ServerResponse } from 'node:http'
import type { Context, MiddlewareHandler } from 'hono'
import { attemptEvents, propagationOf } from '../endpoint/call.js'
import { planAttempt } from '../endpoint/plan.js'
import { toGatewayError } from '../errors.js'
import type { ToolCatalog } from '../observability/tool-labels.js'
import { sendWithRetries } from '../upstream/attempts.js'
import type { ServerBalancing } from '../upstream/balancing.js'
import type { ForwardResult, StreamHead } from '../upstream/forward-types.js'
import type { StreamStop } from '../upstream/lifecycle.js'
import type { Upstream } from '../upstream/upstream.js'
import { callOf } from './endpoint-call.js'
import type { GatewayEnv } from './env.js'
import { ALREADY_SENT } from './node-response.js'
import { StreamEnding } from './stream-ending.js'

/**
 * Last stage: picks a replica and streams the request to it and the answer back, writing straight
 * into Node's response (docs/design/hot-path.md: web Response objects cost ~1.5x on this path).
 * What is sent is planned once (endpoint/plan.ts, as for a virtual server's member requests);
 * which replicas, and when another one is tried, is upstream/attempts.ts (docs/design/retries.md).
 */
export const proxy = (tools: ToolCatalog): MiddlewareHandler<GatewayEnv> =>
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
    const config = c.get('runtime').config
    const planned = planAttempt(server, call, {
      auth: c.get('upstreamAuthorization'),
      propagation: propagationOf(call),
      observers,
      listFilter: filter,
      tasks: 'own',
      maxInspectBytes: config.limits.maxInspectBytes,
      maxObservedBytes: config.cache?.maxEntryBytes,
      maxStreams: config.limits.maxStreamsPerPrincipal,
      onAttempt: attemptEvents(call),
    })
    if (planned.kind === 'answer') {
      c.set('outcome', planned.outcome)
      return c.body(planned.body, 200, { 'content-type': 'application/json' })
    }
    const b = server.balancing
    const stop = planned.plan.stop
    if (stop !== undefined) {
      // A stream's head: from then on the stream no longer needs the stages (StreamWatch below).
      const watch = new StreamWatch(c, b.lifecycle, stop)
      const plan = { ...planned.plan, onStreamEnd: watch.end }
      return watch.follow(sendWithRetries(c.env.outgoing, b, plan), plan)
    }
    const plan = planned.plan
    try {
      const result = await sendWithRetries(c.env.outgoing, b, plan)
      c.set('outcome', outcomeOf(result))
      return ALREADY_SENT
    } finally {
      if (plan.upstream !== undefined) c.set('upstreamId', plan.upstream.id)
    }
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
class StreamWatch {
  readonly #ending = new StreamEnding()
  readonly #res: ServerResponse
  readonly #lifecycle: ServerBalancing['lifecycle']
  readonly #stop: StreamStop
  /** The request's context, until the head is written or the forward settles, whichever is first. */
  #c: Context<GatewayEnv> | undefined
  #plan: { readonly upstream: Upstream | undefined } | undefined
  /** The replica that answered, once the stream's head is out (the plan is let go then). */
  #upstreamId: string | undefined
  #answer: ((answer: Response) => void) | undefined
  #fail: ((err: unknown) => void) | undefined

  constructor(c: Context<GatewayEnv>, lifecycle: ServerBalancing['lifecycle'], stop: StreamStop) {
    this.#c = c
    this.#res = c.env.outgoing
    this.#lifecycle = lifecycle
    this.#stop = stop
  }

  /** The stage's answer: ALREADY_SENT once the head is written or the forward ends. */
  follow(
    forwarded: Promise<ForwardResult | StreamHead>,
    plan: { readonly upstream: Upstream | undefined },
  ): Promise<Response> {
    this.#plan = plan
    // Callbacks of their own, not fields: once the promise settled, a held stream keeps neither.
    forwarded.then(
      (result) => (result.kind === 'streaming' ? this.#head() : this.#ended(result, undefined)),
      (err: unknown) => this.#ended(undefined, err),
    )
    return new Promise((resolve, reject) => {
      this.#answer = resolve
      this.#fail = reject
    })
  }

  /** AttemptPlan.onStreamEnd: a stream whose head was written has ended. */
  readonly end = (result: ForwardResult): void => this.#ended(result, undefined)

  /** The head is written: the stages may return. */
  #head(): void {
    const c = this.#c
    if (c === undefined) return
    this.#upstreamId = this.#plan?.upstream?.id
    c.set('streamEnd', this.#ending)
    const answer = this.#answer
    this.#release()
    answer?.(ALREADY_SENT)
  }

  /** The forward settled: with `result`, or failed with `err`. */
  #ended(result: ForwardResult | undefined, err: unknown): void {
    this.#lifecycle.closeStream(this.#stop)
    const c = this.#c
    if (c === undefined) {
      // Nothing fails once the head is out (the end comes with a result); should a bug make it,
      // the client cannot take a half stream for a whole one.
      if (result === undefined) this.#res.destroy()
      const outcome = result === undefined ? toGatewayError(err).code : outcomeOf(result)
      this.#ending.end({ outcome, upstreamId: this.#upstreamId })
      return
    }
    const upstreamId = this.#plan?.upstream?.id
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
    this.#plan = undefined
    this.#answer = undefined
    this.#fail = undefined
  }
}

function outcomeOf(result: ForwardResult | StreamHead): string {
  return result.kind === 'done' ? 'ok' : result.kind
}
