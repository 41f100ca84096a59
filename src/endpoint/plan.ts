import { GatewayError } from '../errors.js'
import type { BodyTransform, HeaderMap } from '../mcp/body-transform.js'
import { parseMessage } from '../mcp/jsonrpc.js'
import { listFilterHook, type ListFilter } from '../mcp/list-filter.js'
import { isStreamMethod, RETRY_SAFE_METHODS } from '../mcp/methods.js'
import { requestIdOf, type ExpectedId } from '../mcp/answer-scan.js'
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
import { refuseCallback } from '../policy/event-callbacks.js'
import { bodyWithTraceContext } from '../telemetry/propagate.js'
import type { AttemptPlan } from '../upstream/attempts.js'
import type { ServerBalancing } from '../upstream/balancing.js'
import type { ServerDeadlines } from '../upstream/deadlines.js'
import type { ForwardResult } from '../upstream/forward-types.js'
import type { HandleOwner, SessionCodec } from '../upstream/sessions.js'
import type { Upstream } from '../upstream/upstream.js'
import { callerKey, hashKeyOf, type EndpointCall } from './call.js'
import { forwardHeaders, type HeaderChanges } from './headers.js'

/** What a server is to the plan builder (a ServerRuntime has all of it). */
export interface PlanServer {
  readonly name: string
  readonly balancing: ServerBalancing
  readonly upstreamHeaders: readonly string[]
  readonly classify: { readonly maxDepth: number }
  /** `events.callbacks`: where webhooks may go (docs/events.md); none given refuses every one. */
  readonly config?: { readonly events?: { readonly callbacks: readonly string[] } }
  /** Per-method, per-tool and per-prompt deadlines (`timeouts:`); undefined when none is set. */
  readonly deadlines?: ServerDeadlines | undefined
}

/**
 * A 2025-era session the gateway itself holds toward a 2025-only member of a virtual server
 * (client/era.ts): the replica it lives on, and the header list it is reached with.
 */
export interface HeldSession {
  readonly pin: Upstream | undefined
  /** The era and session headers of the session in place of the client's (spec 2025-11-25). */
  readonly headers: (headers: readonly string[]) => string[]
  /** The answer for a status that means the session is gone (404), in place of the body. */
  readonly gone: BodyTransform
}

/**
 * A request's plan as the attempt loop takes it: what a `prepare` hook may change before the first
 * try, without reaching past the endpoint into upstream/.
 */
export type Plan = AttemptPlan

/** How a request is forwarded beyond what the call itself says. */
export interface PlanOptions {
  /** `Authorization` for the backend (token exchange, RFC 8693); never the caller's own. */
  readonly auth?: string | undefined
  /** Trace context of the gateway span, for headers and `params._meta`. */
  readonly propagation?: Readonly<Record<string, string>> | undefined
  readonly changes?: HeaderChanges | undefined
  /** Hooks that only read the final response (cache capture): the answer streams untouched. */
  readonly observers?: readonly ResultHook[] | undefined
  /** Hooks that change or take the final response: the whole answer is read (bounded). */
  readonly rewriters?: readonly ResultHook[] | undefined
  /** The caller's view of a list (policy, curation), applied to the answer. */
  readonly listFilter?: ListFilter | undefined
  /**
   * Task ids: `own` seals and opens them with the server's own codec (its endpoint); a sealer
   * seals the answer's ids with it, the request's having been opened already (a virtual server's
   * member request: virtual/tasks.ts); `none` leaves them alone.
   */
  readonly tasks: 'own' | TaskIdSealer | 'none'
  /** `limits.maxInspectBytes`: the most of an answer that is read. */
  readonly maxInspectBytes: number
  /** `cache.maxEntryBytes`: an answer only observed is not read past it. */
  readonly maxObservedBytes?: number | undefined
  /** Per-caller budget of long-lived streams (`limits.maxStreamsPerPrincipal`). */
  readonly maxStreams: number
  /** The hooks see an answer whatever its status (the gateway's own reads), not only a 200. */
  readonly anyStatus?: boolean | undefined
  /** A session the gateway holds toward a 2025-only member. */
  readonly session?: HeldSession | undefined
  /** Replaces the response-header hook (AttemptPlan.onHeaders). */
  readonly onHeaders?: ((status: number, headers: HeaderMap) => void) | undefined
  readonly onAttempt?: ((replica: string, retry: number) => void) | undefined
  readonly onStreamEnd?: ((result: ForwardResult) => void) | undefined
  /**
   * Changes the plan once it is built, before the first try (client/progress-relay.ts: a call
   * that also reads its 2025-era member session's stream); applied by the send.
   */
  readonly prepare?: ((plan: Plan) => Plan | Promise<Plan>) | undefined
}

/** A request the gateway answers itself, in the server's name (a JSON-RPC body on HTTP 200). */
interface InBandAnswer {
  readonly kind: 'answer'
  readonly outcome: string
  readonly body: string
}

export type Planned = { readonly kind: 'plan'; readonly plan: AttemptPlan } | InBandAnswer

/**
 * planAttempt: everything about a request's way to a server that is decided once, before the
 * attempt loop (upstream/attempts.ts) tries replicas: its headers, its 2025-era session, task ids,
 * trace context, how the answer is read, the hash key and the stream budget. The one plan builder
 * for every caller: a direct request, a virtual server's member request, the gateway's own reads
 * (built once, whatever the retries: docs/design/retries.md).
 */
export function planAttempt(server: PlanServer, call: EndpointCall, opts: PlanOptions): Planned {
  const b = server.balancing
  const mcp = call.mcp
  const method = call.http
  // Handles (2025-era session ids, task ids) are sealed for this caller: its verified issuer and
  // subject, or nobody without auth (docs/balancing.md "Legacy sessions", "Task ids").
  const owner: HandleOwner | undefined = call.principal
  let changes = opts.changes
  let body = call.body
  // Only answers that can carry a task id are rewritten for it, never a plain tools/call.
  const tasks =
    opts.tasks === 'none' || method !== 'POST' || !mayCarryTaskIds(mcp.method, mcp.message, body)
      ? undefined
      : opts.tasks === 'own'
        ? taskSealer(b.sessions, owner)
        : opts.tasks
  if (opts.tasks === 'own' && tasks !== undefined && isTaskMethod(mcp.method)) {
    const message = mcp.message ?? parseMessage(body, server.classify.maxDepth)
    if (message.kind !== 'request')
      throw new GatewayError('invalid_request', `${mcp.method} is a request`)
    // SECURITY: the backend's list is per server, not per principal; it would hand the caller
    // other principals' tasks. Without auth everyone is one principal, and the list is relayed.
    if (mcp.method === 'tasks/list' && owner !== undefined)
      return inBand('tasks_list_local', ownTasksListAnswer(message.rawId))
    if (mcp.method !== 'tasks/list') {
      const opened = openTaskRequest(message, body, call.head.name, tasks)
      // SECURITY: a task id this caller was not given is unknown; nothing is forwarded.
      if (opened === undefined) return inBand('task_not_found', unknownTaskAnswer(message.rawId))
      body = opened.body
      // Mcp-Name mirrors params.taskId (SEP-2243), where the request carries routing headers.
      if (call.head.name !== undefined || mcp.era !== 'legacy')
        changes = { ...changes, name: opened.upstreamId }
    }
  } else if (mcp.method === 'subscriptions/listen') {
    refuseTaskSubscriptions(mcp.message ?? parseMessage(body, server.classify.maxDepth))
  } else if (mcp.method === 'events/subscribe') {
    // SECURITY: the backend POSTs to the callback; only where `events.callbacks` allows (SSRF).
    const message = mcp.message ?? parseMessage(body, server.classify.maxDepth)
    refuseCallback(server.config?.events?.callbacks, message)
  }
  // 2025-era sessions live on one replica; the id the client holds says which (docs/balancing.md
  // "Legacy sessions"). 2026-07-28 traffic has no sessions and never gets any of this.
  const legacy = mcp.era === 'legacy' && opts.session === undefined
  let pinned = opts.session?.pin
  if (legacy && call.head.sessionId !== undefined) {
    const session = b.sessions.open(call.head.sessionId, owner)
    // SECURITY: unknown, malformed, tampered ids, and ids another principal opened, are refused,
    // never guessed at; the 404 makes the client start a new session (spec 2025-11-25 §Session
    // Management). That holds for POST, the GET stream and DELETE alike.
    if (session === undefined) throw new GatewayError('session_not_found')
    pinned = session.replica
    changes = { ...changes, sessionId: session.sessionId }
  }
  let headers = forwardHeaders(server.upstreamHeaders, call, opts.auth, opts.propagation, changes)
  if (opts.session !== undefined) headers = opts.session.headers(headers)
  // Only a body the gateway parsed (and judged) gets the splice; one forwarded unparsed under
  // trusted headers keeps the client's `_meta` (docs/security.md "Trace context in the body").
  if (opts.propagation !== undefined && mcp.message !== undefined && method === 'POST')
    body = bodyWithTraceContext(body, mcp.message, opts.propagation)
  // Long-lived streams have budgets of their own, per caller here and per replica in the attempt
  // loop, so idle streams cannot take the capacity ordinary requests need (docs/balancing.md
  // "Streams"). Opened last: nothing after it may throw before the caller's `try` gives it back.
  const stop = isLongLived(call)
    ? b.lifecycle.openStream(callerKey(call.principal, call.peer), opts.maxStreams)
    : undefined
  const expected = method === 'POST' ? expectedId(mcp, body) : undefined
  // A request's own deadline (docs/balancing.md "Deadlines"), from the method and name the
  // request already carries; a long-lived stream and a notification have none.
  const deadlines = server.deadlines
  const deadline =
    deadlines === undefined ||
    stop !== undefined ||
    mcp.method === undefined ||
    mcp.kind === 'notification'
      ? undefined
      : deadlines.forRequest(mcp.method, mcp.targets, owner)
  const plan: AttemptPlan = {
    pool: b.poolFor(mcp.targets),
    pinned,
    hashKey: hashKeyOf(b, call),
    safe: mcp.kind !== 'notification' && RETRY_SAFE_METHODS.has(mcp.method ?? ''),
    legacy,
    owner,
    method,
    headers,
    body: method === 'POST' ? body : null,
    transform: transformOf(opts, mcp.method, tasks, expected),
    expected,
    stop,
    deadline,
    upstream: undefined,
    onHeaders: opts.onHeaders,
    onAttempt: opts.onAttempt,
    onStreamEnd: opts.onStreamEnd,
  }
  return { kind: 'plan', plan }
}

/**
 * Whether a request is a long-lived stream (`subscriptions/listen`, `events/stream`, a 2025-era
 * GET stream): held under the stream budgets (docs/balancing.md "Streams").
 */
export function isLongLived(call: Pick<EndpointCall, 'mcp' | 'http'>): boolean {
  return isStreamMethod(call.mcp.method) || call.http === 'GET'
}

/**
 * The id the answer must carry (mcp/answer-scan.ts): the parsed request's, else the one written
 * in the body forwarded unparsed (classify lets only requests through so: a modern POST with
 * Mcp-Method). A body without a readable id expects answers without one.
 */
function expectedId(mcp: EndpointCall['mcp'], body: Buffer): ExpectedId {
  const message = mcp.message
  if (message !== undefined) return message.kind === 'request' ? message.rawId : null
  return requestIdOf(body) ?? null
}

/**
 * How the answer is read: every JSON or SSE answer below 500 is at least checked to be the
 * answer to this request (mcp/answer-scan.ts); hooks on a 200 (any status for the gateway's own
 * reads) observe or rewrite it, bounded. A filter, a rewriter or a task-id seal rewrites the
 * answer, so it must see all of it (bounded: 502 beyond); hooks that only look let the answer
 * stream and skip what is too large. 5xx answers are held and judged by the dispatch itself.
 */
function transformOf(
  opts: PlanOptions,
  method: string | undefined,
  tasks: TaskIdSealer | undefined,
  expected: ExpectedId,
): AttemptPlan['transform'] {
  const filter = opts.listFilter
  const observers = opts.observers ?? NONE
  const rewriters = opts.rewriters ?? NONE
  const gone = opts.session?.gone
  const anyStatus = opts.anyStatus === true || opts.session !== undefined
  const rewrite = filter !== undefined || tasks !== undefined || rewriters.length > 0
  // The common case (a plain call): one shared factory, nothing allocated for it per request.
  if (observers.length === 0 && !rewrite && gone === undefined && !anyStatus)
    return passFor(expected, opts.maxInspectBytes)
  let hooks: readonly ResultHook[] = [...observers, ...rewriters]
  if (filter !== undefined) hooks = [...hooks, listFilterHook(filter, method ?? '')]
  // SECURITY: a backend's task id reaches the client only sealed for its caller.
  if (tasks !== undefined) hooks = [...hooks, taskIdHook(tasks)]
  const max = rewrite
    ? opts.maxInspectBytes
    : Math.min(opts.maxInspectBytes, opts.maxObservedBytes ?? Infinity)
  const mode = rewrite ? 'rewrite' : 'observe'
  return transformFor(hooks, max, mode, expected, gone, anyStatus, opts.maxInspectBytes)
}

// Made in a scope of their own: the transform outlives the plan for as long as a stream runs, and
// a closure made in planAttempt would keep that whole scope (V8 gives one context to all closures
// of a scope; docs/design/hot-path.md §Stream memory).
function passFor(
  expected: ExpectedId,
  maxEventBytes: number,
): (status: number, h: HeaderMap) => BodyTransform | undefined {
  return (status, h) =>
    status < 500
      ? resultTransform(h['content-type'], maxEventBytes, NONE, 'pass', expected, status)
      : undefined
}

function transformFor(
  hooks: readonly ResultHook[],
  max: number,
  mode: 'rewrite' | 'observe',
  expected: ExpectedId,
  gone: BodyTransform | undefined,
  anyStatus: boolean,
  maxEventBytes: number,
): (status: number, h: HeaderMap) => BodyTransform | undefined {
  return (status, h) => {
    if (status === 404 && gone !== undefined) return gone
    // The gateway's own reads take a typeless answer for JSON: 2025-era servers refuse a
    // request without a session so (mcp-framework), and the refusal is what they learn from.
    const type = contentTypeOf(h, anyStatus)
    if (status === 200 || anyStatus)
      return resultTransform(type, max, hooks, mode, expected, status)
    return status < 500
      ? resultTransform(type, maxEventBytes, NONE, 'pass', expected, status)
      : undefined
  }
}

const NONE: readonly ResultHook[] = Object.freeze([])

function contentTypeOf(h: HeaderMap, anyStatus: boolean): string | string[] | undefined {
  const type = h['content-type']
  return type === undefined && anyStatus ? 'application/json' : type
}

function taskSealer(codec: SessionCodec, owner: HandleOwner | undefined): TaskIdSealer {
  return {
    wrap: (id) => codec.sealTask(id, owner),
    unwrap: (handle) => codec.openTask(handle, owner),
  }
}

function inBand(outcome: string, body: string): InBandAnswer {
  return { kind: 'answer', outcome, body }
}
