import type { ServerResponse } from 'node:http'
import type { Context, MiddlewareHandler } from 'hono'
import type { Principal } from '../auth/principal.js'
import type { GatewayEnv } from './env.js'
import { parseMessage } from '../mcp/jsonrpc.js'
import { listFilterHook } from '../mcp/list-filter.js'
import { resultTransform, type ResultHook } from '../mcp/result-transform.js'
import {
  isTaskMethod,
  mayCarryTaskIds,
  openTaskRequest,
  ownTasksListAnswer,
  refuseTaskSubscriptions,
  taskIdHook,
  unknownTaskAnswer,
  type TaskIdSealer,
} from '../mcp/task-ids.js'
import { GatewayError, toGatewayError } from '../errors.js'
import { sendWithRetries } from '../upstream/attempts.js'
import type { BodyTransform, HeaderMap } from '../mcp/body-transform.js'
import type { ForwardResult, StreamHead } from '../upstream/forward-types.js'
import { RETRY_SAFE_METHODS } from '../upstream/retry.js'
import type { HandleOwner, SessionCodec } from '../upstream/sessions.js'
import type { ServerBalancing } from '../upstream/balancing.js'
import type { StreamStop } from '../upstream/lifecycle.js'
import type { Upstream } from '../upstream/upstream.js'
import { EVENT } from '../telemetry/events.js'
import { bodyWithTraceContext, setTraceHeaders } from '../telemetry/propagate.js'
import type { RequestTrace } from '../telemetry/request-trace.js'
import type { ToolCatalog } from '../observability/tool-labels.js'
import { spanRequest } from './trace.js'
import { ALREADY_SENT } from './node-response.js'
import { StreamEnding } from './stream-ending.js'

/**
 * Last stage: picks a replica and streams the request to it and the answer back, writing straight
 * into Node's response (docs/design/hot-path.md: web Response objects cost ~1.5x on this path).
 * Which replicas, and when another one is tried, is upstream/attempts.ts (docs/design/retries.md).
 */
export const proxy = (tools: ToolCatalog): MiddlewareHandler<GatewayEnv> =>
  async function proxy(c) {
    // c.get, never the `var` getter: hono's getter copies every variable into a new object per access.
    const server = c.get('server')
    const head = c.get('head')
    const body = c.get('body')
    const mcp = c.get('mcp')
    const incoming = c.env.incoming
    const auth = c.get('upstreamAuthorization')
    // SECURITY: every name added after head.forward was dropped from it whatever its case
    // (readRequestHead with the server's HeaderRules), so each value below replaces the client's
    // copies instead of joining them; the judged MCP-Protocol-Version, Mcp-Method and Mcp-Name
    // stay in head.forward as received (a config cannot name them: owned-headers.ts).
    // prettier-ignore
    const headers = [
      ...head.forward,
      ...server.upstreamHeaders,
      // SECURITY: the token exchanged for this backend (RFC 8693), never the caller's own.
      ...(auth === undefined ? [] : ['authorization', auth]),
      // SECURITY: gateway-owned identity headers; client Forwarded / X-Forwarded-* / X-Real-IP
      // never reach a backend.
      'x-forwarded-for', incoming.socket.remoteAddress ?? '',
      'x-forwarded-proto', 'http',
      'x-forwarded-host', head.host ?? '',
    ]
    const trace = c.get('trace')
    // Trace context for the backend in both places MCP carries it: the W3C headers here, the
    // body's `params._meta` below (docs/operations.md "Context: in and out").
    const propagation = trace === undefined ? undefined : traceHeaders(headers, trace, c)
    const filter = c.get('listFilter')
    let observers = c.get('resultHooks') ?? []
    // Tool names for the metrics' closed label set, from the backend's own list (throttled), only
    // where the answer is read anyway (cache capture, policy filter): learning never changes how
    // an answer is relayed.
    if (mcp.method === 'tools/list' && (observers.length > 0 || filter !== undefined)) {
      const learn = tools.learner(server.name)
      if (learn !== undefined) observers = [...observers, learn]
    }
    const limits = c.get('runtime').config.limits
    const b = server.balancing
    // Handles (2025-era session ids, task ids) are sealed for this caller: its verified issuer and
    // subject, or nobody without auth (docs/balancing.md "Legacy sessions", "Task ids").
    const owner: HandleOwner | undefined = c.get('principal')
    // Only answers that can carry a task id are rewritten for it, never a plain tools/call.
    const tasks =
      incoming.method === 'POST' && mayCarryTaskIds(mcp.method, mcp.message, body)
        ? taskSealer(b.sessions, owner)
        : undefined
    // A policy filter or the task-id seal rewrites the answer, so it must see all of it (bounded:
    // 502 beyond). Hooks that only look (cache capture) let the answer stream untouched and skip
    // what is too large.
    const rewrite = filter !== undefined || tasks !== undefined
    let hooks: readonly ResultHook[] = observers
    if (filter !== undefined) hooks = [...hooks, listFilterHook(filter, mcp.method ?? '')]
    if (tasks !== undefined) hooks = [...hooks, taskIdHook(tasks)]
    const maxInspect = rewrite
      ? limits.maxInspectBytes
      : Math.min(limits.maxInspectBytes, c.get('runtime').config.cache?.maxEntryBytes ?? Infinity)
    const transform =
      hooks.length === 0
        ? undefined
        : transformOf(hooks, maxInspect, rewrite ? 'rewrite' : 'observe', mcp.message?.rawId)
    const method = incoming.method as 'POST' | 'GET' | 'DELETE'
    // 2025-era sessions live on one replica; the id the client holds says which
    // (docs/balancing.md "Legacy sessions").
    // 2026-07-28 traffic has no sessions and never gets any of this.
    const legacy = mcp.era === 'legacy'
    let pinned
    if (legacy && head.sessionId !== undefined) {
      const session = b.sessions.open(head.sessionId, owner)
      // SECURITY: unknown, malformed, tampered ids, and ids another principal opened, are refused,
      // never guessed at; the 404 makes the client start a new session (spec 2025-11-25 §Session
      // Management). That holds for POST, the GET stream and DELETE alike.
      if (session === undefined) throw new GatewayError('session_not_found')
      pinned = session.replica
      setHeader(headers, 'mcp-session-id', session.sessionId)
    }
    let forwardBody = body
    if (tasks !== undefined && isTaskMethod(mcp.method)) {
      const message = mcp.message ?? parseMessage(body, server.classify.maxDepth)
      if (message.kind !== 'request')
        throw new GatewayError('invalid_request', `${mcp.method} is a request`)
      // SECURITY: the backend's list is per server, not per principal; it would hand the caller
      // other principals' tasks. Without auth everyone is one principal, and the list is relayed.
      if (mcp.method === 'tasks/list' && owner !== undefined)
        return inBand(c, 'tasks_list_local', ownTasksListAnswer(message.rawId))
      if (mcp.method !== 'tasks/list') {
        const opened = openTaskRequest(message, body, head.name, tasks)
        // SECURITY: a task id this caller was not given is unknown; nothing is forwarded.
        if (opened === undefined)
          return inBand(c, 'task_not_found', unknownTaskAnswer(message.rawId))
        forwardBody = opened.body
        if (head.name !== undefined || !legacy) {
          if (head.name === undefined) headers.push('mcp-name', opened.mcpName)
          else setHeader(headers, 'mcp-name', opened.mcpName)
        }
      }
    } else if (mcp.method === 'subscriptions/listen') {
      refuseTaskSubscriptions(mcp.message ?? parseMessage(body, server.classify.maxDepth))
    }
    // Only a body the gateway parsed (and judged) gets the splice; one forwarded unparsed under
    // trusted headers keeps the client's `_meta` (docs/security.md "Trace context in the body").
    if (propagation !== undefined && mcp.message !== undefined && method === 'POST')
      forwardBody = bodyWithTraceContext(forwardBody, mcp.message, propagation)
    const hash = b.hash
    const hashKey =
      hash === undefined
        ? undefined
        : hash.from === 'header'
          ? scalar(incoming.headers[hash.name])
          : scalar(c.get('principal')?.claims[hash.name]) // no principal without auth: least-request
    const pool = b.poolFor(mcp.targets)
    // Long-lived streams have budgets of their own, per caller here and per replica in the
    // attempt loop, so idle streams cannot take the capacity ordinary requests need
    // (docs/balancing.md "Streams"). Opened last: nothing below may throw before the `try` that
    // gives the slot back.
    const stream = mcp.method === 'subscriptions/listen' || method === 'GET'
    const stop = stream
      ? b.lifecycle.openStream(
          streamOwner(c.get('principal'), incoming.socket.remoteAddress),
          limits.maxStreamsPerPrincipal,
        )
      : undefined
    // A stream's head: from then on the stream no longer needs the stages (StreamWatch below).
    const watch = stop === undefined ? undefined : new StreamWatch(c, b.lifecycle, stop)
    const plan = {
      pool,
      pinned,
      hashKey,
      safe: mcp.kind !== 'notification' && RETRY_SAFE_METHODS.has(mcp.method ?? ''),
      legacy,
      owner,
      method,
      headers,
      body: method === 'POST' ? forwardBody : null,
      transform,
      stop,
      upstream: undefined as Upstream | undefined,
      onAttempt: trace === undefined ? undefined : attemptEvents(trace),
      onStreamEnd: watch?.end,
    }
    if (watch !== undefined) return watch.follow(sendWithRetries(c.env.outgoing, b, plan), plan)
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

// The callbacks below outlive the stages for as long as a stream runs (attempt events on a
// retried stream). Each is made in a scope of its own, for the reason StreamWatch gives.

function attemptEvents(trace: RequestTrace): (replica: string, retry: number) => void {
  return (replica, retry) => trace.event(EVENT.attempt, { 'mcp_edge.upstream.id': replica, retry })
}

/** The answer's transform: hooks on a 200, bounded to `maxInspect` bytes. */
function transformOf(
  hooks: readonly ResultHook[],
  maxInspect: number,
  mode: 'rewrite' | 'observe',
  rawId: string | undefined,
): (status: number, h: HeaderMap) => BodyTransform | undefined {
  return (status, h) =>
    status === 200
      ? resultTransform(String(h['content-type'] ?? ''), maxInspect, hooks, mode, rawId)
      : undefined
}

function outcomeOf(result: ForwardResult | StreamHead): string {
  return result.kind === 'done' ? 'ok' : result.kind
}

/**
 * Who a stream counts against: the verified issuer and subject, else the connection's peer address.
 * SECURITY: never X-Forwarded-For or any other header: the client writes those, and could claim a
 * new address for every stream.
 */
function streamOwner(p: Principal | undefined, remoteAddress: string | undefined): string {
  // The issuer's length keeps `a` + `bc` and `ab` + `c` apart.
  return p === undefined
    ? `addr ${remoteAddress ?? ''}`
    : `sub ${p.issuer.length}:${p.issuer}${p.subject}`
}

function taskSealer(codec: SessionCodec, owner: HandleOwner | undefined): TaskIdSealer {
  return {
    wrap: (id) => codec.sealTask(id, owner),
    unwrap: (handle) => codec.openTask(handle, owner),
  }
}

/** An answer the gateway gives in the backend's name (a JSON-RPC body on HTTP 200). */
function inBand(c: Context<GatewayEnv>, outcome: string, text: string): Response {
  c.set('outcome', outcome)
  return c.body(text, 200, { 'content-type': 'application/json' })
}

/**
 * Replaces the client's `traceparent` / `tracestate` with ones naming the gateway's span, and
 * returns them for the body.
 */
function traceHeaders(
  headers: string[],
  trace: RequestTrace,
  c: Context<GatewayEnv>,
): Readonly<Record<string, string>> {
  trace.begin(spanRequest(c))
  const propagation = trace.propagation()
  setTraceHeaders(headers, propagation)
  return propagation
}

/** Replaces the value of header `name` (lower-case) in a [name, value, …] list. */
function setHeader(headers: string[], name: string, value: string): void {
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] as string).toLowerCase() === name) headers[i + 1] = value
  }
}

/** A hash key from a header or claim value: strings and numbers only, else none. */
function scalar(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined
}
