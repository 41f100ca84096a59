import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import type { Principal } from '../auth/principal.js'
import { GatewayError } from '../errors.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { RETRY_SAFE_METHODS } from '../mcp/methods.js'
import { resultTransform, type ResultHook } from '../mcp/result-transform.js'
import type { ServerRuntime, VirtualRuntime } from '../runtime/runtime.js'
import { sendWithRetries } from '../upstream/attempts.js'
import { UpstreamFailure } from '../upstream/failure.js'
import type { BodyTransform, HeaderMap } from '../mcp/body-transform.js'
import type { ForwardResult } from '../upstream/forward-types.js'
import { full, hasRoom } from '../upstream/pool.js'
import type { Upstream } from '../upstream/upstream.js'
import type { VirtualSession } from '../virtual/client-session.js'
import { LegacyGetStream, SessionGone } from '../virtual/legacy-get-stream.js'
import type { ListenMember } from '../virtual/listen-merge.js'
import { callMember, type MemberAnswer, type MemberRequest } from '../upstream/ask.js'
import {
  initializeMember,
  legacyHeaders,
  memberSessionKey,
  sendInLegacySession,
  type MemberEra,
  type MemberSend,
} from '../virtual/member-era.js'
import { MemberSessions, type MemberSession } from '../virtual/member-sessions.js'

/** What the gateway learnt about each member's era, and its sessions toward 2025-only members. */
interface MemberState {
  readonly eras: Map<string, MemberEra>
  readonly sessions: MemberSessions
}

// Per virtual runtime: a reload starts afresh (member sessions are re-established on first use).
const states = new WeakMap<VirtualRuntime, MemberState>()

function stateOf(v: VirtualRuntime): MemberState {
  let s = states.get(v)
  if (s === undefined) {
    s = { eras: new Map(), sessions: new MemberSessions() }
    states.set(v, s)
  }
  return s
}

/** Whose member sessions a request uses: its 2025-era client session, or its caller. */
export interface EraCaller {
  readonly session: VirtualSession | undefined
  /** The stream-owner style caller key (verified issuer and subject, else the peer address). */
  readonly owner: string
  readonly log: Logger
}

/**
 * The headers a member request of this caller carries, built as its own endpoint's proxy stage
 * builds them (pipeline/virtual.ts memberHeaders: the judged client headers, the member's
 * configured ones, its exchanged token, X-Forwarded-*), for `method` and `body`.
 */
export type MemberHeaders = (
  member: ServerRuntime,
  body: Buffer,
  method: string,
) => Promise<string[]>

/** The member's era as far as the gateway knows yet (undefined before its first answer). */
export function eraOf(v: VirtualRuntime, member: ServerRuntime): MemberEra | undefined {
  return stateOf(v).eras.get(member.name)
}

/** The caller key member sessions of a 2026-07-28 client are kept under (as stream owners). */
export function callerKey(p: Principal | undefined, remoteAddress: string | undefined): string {
  return p === undefined
    ? `addr ${remoteAddress ?? ''}`
    : `sub ${p.issuer.length}:${p.issuer}${p.subject}`
}

/** Ends this process's member sessions of a 2025-era client session (its DELETE). */
export async function endMemberSessions(
  v: VirtualRuntime,
  session: VirtualSession,
  log: Logger,
): Promise<void> {
  const ended = await stateOf(v).sessions.end(memberSessionKey(session, ''))
  await Promise.all(
    ended.map(async ([name, s]) => {
      const member = v.members.find((m) => m.name === name)
      const up = (s.pin as Upstream | undefined) ?? member?.balancing.pool.upstreams[0]
      if (member === undefined || up === undefined || s.sessionId === undefined) return
      try {
        const res = await up.dispatcher.request({
          origin: up.origin,
          path: up.path,
          method: 'DELETE',
          headers: [
            ...member.upstreamHeaders,
            'mcp-session-id',
            s.sessionId,
            'mcp-protocol-version',
            s.version,
          ],
          headersTimeout: member.config.timeouts.responseHeadersMs,
          bodyTimeout: member.config.timeouts.responseHeadersMs,
        })
        await res.body.dump()
      } catch (err) {
        // The member forgets idle sessions on its own; a failed DELETE only leaves one to expire.
        log.debug({ virtualServer: v.name, member: name, err: String(err) }, 'member DELETE failed')
      }
    }),
  )
}

/**
 * A member's answer to a 2026-07-28 request that says the member speaks only 2025-era protocol:
 * a 4xx with a JSON-RPC error, which is how 2025-era servers refuse a request without a session
 * or with an unknown protocol version (spec 2026-07-28 basic/versioning: a client falls back to
 * `initialize` on such an answer; the gateway does the same toward its members).
 */
function refusesModern(a: MemberAnswer): boolean {
  return a.status >= 400 && a.status < 500 && a.status !== 404 && isRecord(a.message.error)
}

/**
 * `callMember` in the member's own era (docs/virtual-servers.md "2025-era clients"): as is for a
 * member that speaks 2026-07-28; within a member session for a 2025-only one. A member's era is
 * learnt from its first refusal of a 2026-07-28 request and kept for the runtime's life. A
 * `server/discover` to a 2025-only member is answered from its `initialize` result.
 */
export async function callInEra(
  v: VirtualRuntime,
  member: ServerRuntime,
  req: MemberRequest,
  caller: EraCaller,
): Promise<MemberAnswer> {
  const state = stateOf(v)
  if (state.eras.get(member.name) !== 'legacy') {
    let a: MemberAnswer
    try {
      a = await callMember(member, req)
    } catch (err) {
      // 2025-era servers refuse a request without a session with `"id": null` (they do not read
      // it), which the id check takes for another request's answer.
      const refused =
        err instanceof UpstreamFailure &&
        err.code === 'upstream_id_mismatch' &&
        err.status !== undefined &&
        err.status >= 400 &&
        err.status < 500 &&
        err.status !== 404
      if (!refused || state.eras.get(member.name) === 'modern') throw err
      a = { status: err.status as number, message: { error: { code: -32000 } } }
    }
    if (!refusesModern(a)) {
      if (a.status === 200) state.eras.set(member.name, 'modern')
      return a
    }
    if (state.eras.get(member.name) === 'modern') return a
    state.eras.set(member.name, 'legacy')
    caller.log.info(
      { virtualServer: v.name, member: member.name },
      'virtual server: member speaks 2025-era protocol only; the gateway initialises sessions with it',
    )
  }
  const send = sender(member, req)
  const key = memberSessionKey(caller.session, caller.owner)
  if (req.method === 'server/discover') {
    const session = await state.sessions.get(key, member.name, () =>
      initializeMember(send, req.headers, caller.session),
    )
    return {
      status: 200,
      message: {
        jsonrpc: '2.0',
        result: {
          supportedVersions: ['2026-07-28'],
          capabilities: session.capabilities ?? {},
          resultType: 'complete',
        },
      },
    }
  }
  const a = await sendInLegacySession(
    state.sessions,
    key,
    member.name,
    caller.session,
    send,
    req.headers,
    req.body,
    req.rawId,
  )
  return { status: a.status, message: a.message ?? {}, sessionId: a.sessionId }
}

/**
 * A 2025-era result as a 2026-07-28 client needs it: every result carries `resultType`
 * (spec 2026-07-28 basic/index), and a cacheable one `ttlMs` and `cacheScope` (spec 2026-07-28
 * basic/utilities/caching), which 2025-era servers never send: `0` / `private`, so nobody
 * caches what the member did not say may be cached.
 */
function modernResult(
  message: Readonly<Record<string, unknown>>,
  method: string,
): Record<string, unknown> {
  if (!isRecord(message.result)) return { ...message }
  const result: Record<string, unknown> = { resultType: 'complete', ...message.result }
  if (CACHEABLE.has(method) && result.ttlMs === undefined) {
    result.ttlMs = 0
    result.cacheScope = 'private'
  }
  return { ...message, result }
}

const CACHEABLE: ReadonlySet<string> = new Set(['resources/read'])

/** Sends one message of a 2025-era session to the member, collected (upstream/ask.ts). */
function sender(member: ServerRuntime, req: MemberRequest): MemberSend {
  return async (headers, body, rawId, pin) => {
    const a = await callMember(member, {
      ...req,
      headers,
      body,
      rawId: rawId ?? '""',
      pinned: pin as Upstream | undefined,
    })
    return { status: a.status, message: a.message, sessionId: a.sessionId, pin: a.upstream }
  }
}

/** A 404 for the member session: nothing is relayed, the caller initialises anew and retries. */
const SESSION_GONE: BodyTransform = {
  streaming: false,
  push: () => undefined,
  end: () => {
    throw new GatewayError('session_not_found', 'the member no longer knows the session')
  },
}

/**
 * Streams a call routed to a 2025-only member to the client as the member answers it (progress
 * events as they come, then the answer), within the member session of the caller, through the
 * member's attempt loop pinned to the replica that holds the session (docs/virtual-servers.md
 * "2025-only members"). The answer is read by the same bounded, id-checked reader as a filtered
 * answer (mcp/result-transform.ts): whole events pass as they complete, one event is at most
 * `maxBytes`, and an answer to another request id is refused (`upstream_id_mismatch`, in band
 * once the stream has started). A 2026-07-28 client's result gets `resultType` (and the cache
 * hints of modernResult); a 2025-era client gets the member's result as is; `hooks` then see
 * it (task ids sealed, mcp/task-ids.ts). A member that answers 404 for its session (it
 * restarted) is initialised again, once.
 */
export async function streamInEra(
  res: ServerResponse,
  v: VirtualRuntime,
  member: ServerRuntime,
  req: MemberRequest,
  caller: EraCaller,
  extra: readonly ResultHook[] = [],
): Promise<{ readonly result: ForwardResult; readonly upstream: Upstream | undefined }> {
  const state = stateOf(v)
  const key = memberSessionKey(caller.session, caller.owner)
  const send = sender(member, req)
  const b = member.balancing
  const hooks: ResultHook[] =
    caller.session === undefined
      ? [(m) => (isRecord(m.result) ? modernResult(m, req.method) : undefined), ...extra]
      : [...extra]
  for (let attempt = 0; ; attempt++) {
    const session = await state.sessions.get(key, member.name, () =>
      initializeMember(send, req.headers, caller.session),
    )
    const plan = {
      pool: b.poolFor(req.targets),
      pinned: session.pin as Upstream | undefined,
      hashKey: undefined,
      safe: RETRY_SAFE_METHODS.has(req.method),
      legacy: false,
      owner: req.owner,
      method: 'POST' as const,
      headers: legacyHeaders(req.headers, session),
      body: req.body,
      transform: (status: number, h: HeaderMap) =>
        status === 404
          ? SESSION_GONE
          : resultTransform(
              String(h['content-type'] ?? ''),
              req.maxBytes,
              hooks,
              'rewrite',
              req.rawId,
            ),
      onHeaders: (status: number, h: HeaderMap) => {
        b.onHeaders(status, h)
        // SECURITY: the member's session id is the gateway's business; the client has its own.
        delete h['mcp-session-id']
      },
      stop: undefined,
      upstream: undefined as Upstream | undefined,
      onAttempt: req.onAttempt,
    }
    try {
      const result = await sendWithRetries(res, b, plan)
      return { result, upstream: plan.upstream }
    } catch (err) {
      const gone = err instanceof GatewayError && err.code === 'session_not_found'
      if (!gone) throw err
      // The client's own session is fine: a member that loses a fresh session is at fault (502).
      if (attempt > 0) throw new GatewayError('upstream_bad_response', { cause: err })
      await state.sessions.forget(key, member.name, session)
    }
  }
}

/** Accept and Content-Type of a POST to a 2025-era member (spec 2025-11-25 §Sending Messages). */
function postHeaders(headers: readonly string[]): string[] {
  const out = withoutHeaders(headers, POST_REPLACED)
  out.push('content-type', 'application/json', 'accept', 'application/json, text/event-stream')
  return out
}

const POST_REPLACED: ReadonlySet<string> = new Set(['accept', 'content-type'])
const GET_REPLACED: ReadonlySet<string> = new Set([
  'accept',
  'content-type',
  'content-length',
  'last-event-id',
])

function withoutHeaders(headers: readonly string[], drop: ReadonlySet<string>): string[] {
  const out: string[] = []
  for (let i = 0; i < headers.length; i += 2) {
    if (drop.has((headers[i] as string).toLowerCase())) continue
    out.push(headers[i] as string, headers[i + 1] as string)
  }
  return out
}

/** What a 2025-only member is asked to notify about: no `resources/subscribe` is sent to it. */
function withoutSubscribe(caps: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const { resources, ...rest } = caps
  if (!isRecord(resources)) return rest
  const { subscribe: _s, ...kept } = resources
  return { ...rest, resources: kept }
}

/**
 * A 2025-only member as one stream of a merged listen (virtual/listen-merge.ts): its standalone
 * GET stream (spec 2025-11-25 basic/transports §Listening for Messages from the Server), opened in
 * the member session the caller's calls use, on the replica that holds it, counted against that
 * replica's `maxStreams`. The caller's own session, not one the gateway shares between callers:
 * a 2025-era server addresses notifications to a session, and may well tell only the session
 * whose tools changed (the official SDK keeps one server instance per session). `headers` are
 * the member request headers of the caller (pipeline/virtual.ts memberHeaders); the member
 * session is initialised first when this process has none. A member that answers 404 for the
 * session gets a new one on the next attempt.
 */
export async function legacyListenMember(
  v: VirtualRuntime,
  member: ServerRuntime,
  headers: readonly string[],
  caller: EraCaller & { readonly principal: Principal | undefined; readonly maxBytes: number },
): Promise<ListenMember> {
  const state = stateOf(v)
  const key = memberSessionKey(caller.session, caller.owner)
  const post = postHeaders(headers)
  const send = sender(member, {
    headers: post,
    body: Buffer.alloc(0),
    method: 'initialize',
    rawId: '""',
    targets: [],
    owner: caller.principal,
    maxBytes: caller.maxBytes,
  })
  const session = (): Promise<MemberSession> =>
    state.sessions.get(key, member.name, () => initializeMember(send, post, caller.session))
  const first = await session()
  const timeouts = member.config.timeouts
  return {
    name: member.name,
    capabilities: withoutSubscribe(first.capabilities ?? {}),
    acquire: async () => {
      const s = await session()
      const pinned = s.pin as Upstream | undefined
      if (pinned?.health.down === true) {
        await state.sessions.forget(key, member.name, s)
        throw new GatewayError('session_not_found', 'the session is no longer available')
      }
      const up = pinned ?? member.balancing.pool.select(undefined, undefined, true)
      if (!hasRoom(up, true)) throw full(true)
      up.inFlight++
      up.streams++
      let released = false
      return {
        open: (filter, _id, onChange) => {
          const get = withoutHeaders(legacyHeaders(headers, s), GET_REPLACED)
          get.push('accept', 'text/event-stream')
          const ep = {
            url: up.url.href,
            headers: get,
            dispatcher: up.dispatcher,
            headersTimeoutMs: timeouts.responseHeadersMs,
            bodyTimeoutMs: timeouts.streamIdleMs,
          }
          const stream = new LegacyGetStream(ep, filter, onChange)
          void stream.ended.then((err) =>
            err instanceof SessionGone ? state.sessions.forget(key, member.name, s) : undefined,
          )
          return stream
        },
        release: () => {
          if (released) return
          released = true
          up.inFlight--
          up.streams--
        },
      }
    },
  }
}
