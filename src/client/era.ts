import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { GatewayError } from '../errors.js'
import type { BodyTransform } from '../mcp/body-transform.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { outboundHeaders } from '../mcp/outbound.js'
import { CACHEABLE_METHODS } from '../mcp/methods.js'
import { MODERN_VERSIONS } from '../mcp/protocol.js'
import { locate } from '../mcp/rewrite.js'
import type { ResultHook } from '../mcp/result-transform.js'
import type { TaskIdSealer } from '../mcp/task-ids.js'
import { UpstreamFailure } from '../upstream/failure.js'
import type { ForwardResult } from '../upstream/forward-types.js'
import type { Upstream } from '../upstream/upstream.js'
import { ask, type AskOptions, type AskServer, type ServerAnswer } from './ask.js'
import type { EndpointCall } from '../endpoint/call.js'
import {
  initializeMember,
  legacyHeaders,
  memberSessionKey,
  sendInLegacySession,
  type ClientSession,
  type MemberEra,
  type MemberSend,
  type SessionHeaders,
} from './era-session.js'
import { MemberSessions, type MemberSession } from './member-sessions.js'
import type { HeldSession } from '../endpoint/plan.js'
import { ProgressRelay } from './progress-relay.js'
import { sendPlanned, type Seen } from '../endpoint/send.js'
import { SessionStreams } from './session-stream.js'

/**
 * What one virtual server learnt of its members' eras, and the sessions it holds toward the
 * 2025-only ones. Owned by the virtual server's runtime (virtual/compile.ts): a reload starts
 * afresh, and member sessions are re-established on first use.
 */
export class MemberEras {
  readonly eras = new Map<string, MemberEra>()
  readonly sessions = new MemberSessions()
  /** The standalone GET streams of those sessions, one each however many read it. */
  readonly streams = new SessionStreams()
  /**
   * What each 2025-only member said it can do in its first `initialize`: discovery is answered
   * from it, so a new caller does not cost the member a session (its first routed call opens one).
   */
  readonly discovered = new Map<string, Pick<MemberSession, 'capabilities' | 'instructions'>>()

  /** The member's era as far as the gateway knows yet (undefined before its first answer). */
  of(member: string): MemberEra | undefined {
    return this.eras.get(member)
  }
}

/** Whose member sessions a request uses: its 2025-era client session, or its caller. */
export interface EraCaller {
  readonly session: ClientSession | undefined
  /** callerKey of the caller (endpoint/call.ts): verified issuer and subject, else the peer. */
  readonly owner: string
  readonly log: Logger
}

/** A member request: the member's call and how it is planned (endpoint/plan.ts). */
export interface MemberCall {
  readonly call: EndpointCall
  readonly opts: AskOptions
}

/**
 * A member's answer to a 2026-07-28 request that says the member speaks only 2025-era protocol:
 * a 4xx with a JSON-RPC error, which is how 2025-era servers refuse a request without a session
 * or with an unknown protocol version (spec 2026-07-28 basic/versioning: a client falls back to
 * `initialize` on such an answer; the gateway does the same toward its members).
 */
function refusesModern(a: ServerAnswer): boolean {
  return a.status >= 400 && a.status < 500 && a.status !== 404 && isRecord(a.message.error)
}

/**
 * 2025-era servers refuse a request without a session with `"id": null` (they do not read it),
 * which the id check takes for another request's answer.
 */
function refusedWithoutId(err: unknown): number | undefined {
  return err instanceof UpstreamFailure &&
    err.code === 'upstream_id_mismatch' &&
    err.status !== undefined &&
    err.status >= 400 &&
    err.status < 500 &&
    err.status !== 404
    ? err.status
    : undefined
}

/**
 * A member read in the member's own era (docs/virtual-servers.md "2025-only members"): as is for a
 * member that speaks 2026-07-28; within a member session for a 2025-only one. A member's era is
 * learnt from its first refusal of a 2026-07-28 request and kept for the runtime's life. A
 * `server/discover` to a 2025-only member is answered from its `initialize` result.
 */
export async function askInEra(
  eras: MemberEras,
  virtualServer: string,
  member: AskServer,
  req: MemberCall,
  caller: EraCaller,
): Promise<ServerAnswer> {
  if (eras.of(member.name) !== 'legacy') {
    let a: ServerAnswer
    try {
      a = await ask(member, req.call, req.opts)
    } catch (err) {
      const status = refusedWithoutId(err)
      if (status === undefined || eras.of(member.name) === 'modern') throw err
      a = { status, message: { error: { code: -32000 } } }
    }
    if (!refusesModern(a)) {
      if (a.status === 200) eras.eras.set(member.name, 'modern')
      return a
    }
    if (eras.of(member.name) === 'modern') return a
    eras.eras.set(member.name, 'legacy')
    caller.log.info(
      { virtualServer, member: member.name },
      'virtual server: member speaks 2025-era protocol only; the gateway initialises sessions with it',
    )
  }
  const send = sender(member, req)
  const key = memberSessionKey(caller.session, caller.owner)
  if (req.call.mcp.method === 'server/discover') {
    let session = eras.discovered.get(member.name)
    if (session === undefined) {
      session = await eras.sessions.get(key, member.name, () =>
        initializeMember(send, caller.session),
      )
      eras.discovered.set(member.name, session)
    }
    return {
      status: 200,
      message: {
        jsonrpc: '2.0',
        result: {
          supportedVersions: MODERN_VERSIONS,
          capabilities: session.capabilities ?? {},
          ...(typeof session.instructions === 'string'
            ? { instructions: session.instructions }
            : {}),
          resultType: 'complete',
        },
      },
    }
  }
  const rawId = req.call.mcp.message?.rawId ?? '""'
  const a = await sendInLegacySession(
    eras.sessions,
    key,
    member.name,
    caller.session,
    send,
    withoutEnvelope(req.call.body),
    rawId,
  )
  const message = a.message ?? {}
  return {
    status: a.status,
    message: caller.session === undefined ? modernResult(message, req.call.mcp.method) : message,
    sessionId: a.sessionId,
  }
}

/**
 * The session the gateway holds toward a 2025-only member for this caller, initialised (with
 * `req` as the pattern of its requests) when this process has none yet.
 */
export function sessionFor(
  eras: MemberEras,
  member: AskServer,
  req: MemberCall,
  caller: EraCaller,
): Promise<MemberSession> {
  const key = memberSessionKey(caller.session, caller.owner)
  return eras.sessions.get(key, member.name, () =>
    initializeMember(sender(member, req), caller.session),
  )
}

/**
 * A 2025-era result as a 2026-07-28 client needs it: every result carries `resultType`
 * (spec 2026-07-28 basic/index), and a cacheable one `ttlMs` and `cacheScope` (spec 2026-07-28
 * basic/utilities/caching), which 2025-era servers never send: `0` / `private`, so nobody
 * caches what the member did not say may be cached.
 */
function modernResult(
  message: Readonly<Record<string, unknown>>,
  method: string | undefined,
): Record<string, unknown> {
  if (!isRecord(message.result)) return { ...message }
  const result: Record<string, unknown> = { resultType: 'complete', ...message.result }
  if (method !== undefined && CACHEABLE_METHODS.has(method) && result.ttlMs === undefined) {
    result.ttlMs = 0
    result.cacheScope = 'private'
  }
  return { ...message, result }
}

/** The 2026-07-28 envelope keys of `params._meta` (spec 2026-07-28 basic/index §_meta). */
const ENVELOPE_PREFIX = 'io.modelcontextprotocol/'
const ENVELOPE_BYTES = Buffer.from(`"${ENVELOPE_PREFIX}`)

/**
 * A request body for a 2025-only member without the 2026-07-28 envelope in `params._meta`
 * (protocol version, client info and capabilities): a server that speaks both eras routes a body
 * by its envelope, whatever the headers say, and would refuse it as a 2026-07-28 request inside a
 * 2025 session (fastmcp). Everything else is the client's: method, name, arguments, other `_meta`
 * keys (progressToken), byte for byte.
 */
function withoutEnvelope(body: Buffer): Buffer {
  if (!body.includes(ENVELOPE_BYTES)) return body
  const text = body.toString('utf8')
  // The body passed the strict scanner (mcp/strict-json.ts): one object, no duplicate keys.
  const span = locate(text, ['params', '_meta'])
  if (span === undefined) return body
  const metaText = text.slice(span[0], span[1])
  const meta: unknown = JSON.parse(metaText)
  if (!isRecord(meta)) return body
  // Each kept value as the client wrote it (an integer past 2^53 included).
  const kept = Object.keys(meta)
    .filter((k) => !k.startsWith(ENVELOPE_PREFIX))
    .map((k) => {
      const at = locate(metaText, [k]) as [number, number]
      return `${JSON.stringify(k)}:${metaText.slice(at[0], at[1])}`
    })
  return Buffer.from(`${text.slice(0, span[0])}{${kept.join(',')}}${text.slice(span[1])}`)
}

/**
 * The plan's view of a session the gateway holds: its replica, its era and session headers in
 * place of the client's, and a 404 (the member no longer knows it) refused, never relayed.
 */
export function heldSession(session: SessionHeaders, pin: unknown): HeldSession {
  return { pin: pin as Upstream | undefined, headers: (h) => legacyHeaders(h, session), gone: GONE }
}

/** A 404 for the member session: nothing is relayed, the caller initialises anew and retries. */
const GONE: BodyTransform = {
  streaming: false,
  push: () => undefined,
  end: () => {
    throw new GatewayError('session_not_found', 'the member no longer knows the session')
  },
}

/** Sends one message of a 2025-era session to the member, read whole (client/ask.ts). */
function sender(member: AskServer, req: MemberCall): MemberSend {
  return async (session, body, rawId, pin) => {
    const message = parseMethod(body)
    // A session outlives the request that opened it: its handshake is bounded by the member's
    // own timeouts, not by a fan-out deadline, so a member slower than the deadline still gets
    // the session the next request finds (and is not initialised anew each time).
    const handshake = message === 'initialize' || message === 'notifications/initialized'
    const call: EndpointCall = {
      ...req.call,
      body,
      mcp: {
        ...req.call.mcp,
        era: 'legacy',
        method: message,
        kind: rawId === undefined ? 'notification' : 'request',
        message:
          rawId === undefined
            ? undefined
            : { kind: 'request', method: message, params: undefined, rawId },
      },
    }
    const a = await ask(member, call, {
      ...req.opts,
      signal: handshake ? undefined : req.opts.signal,
      session: heldSession(session, pin),
    })
    return { status: a.status, message: a.message, sessionId: a.sessionId, pin: a.upstream }
  }
}

/** The method of a message the era layer builds (initialize, initialized) or relays. */
function parseMethod(body: Buffer): string | undefined {
  try {
    const m: unknown = JSON.parse(body.toString('utf8'))
    return isRecord(m) && typeof m.method === 'string' ? m.method : undefined
  } catch {
    return undefined
  }
}

/**
 * Streams a call routed to a 2025-only member to the client as the member answers it (progress
 * events as they come, then the answer), within the member session of the caller, through the
 * member's attempt loop pinned to the replica that holds the session (docs/virtual-servers.md
 * "2025-only members"). The answer is read by the same bounded, id-checked reader as a filtered
 * answer: whole events pass as they complete, and an answer to another request id is refused. A
 * 2026-07-28 client's result gets `resultType` (and the cache hints of modernResult); a 2025-era
 * client gets the member's result as is; `tasks` then seals its task ids. A member that answers
 * 404 for its session (it restarted) is initialised again, once.
 */
export async function streamInEra(
  res: ServerResponse,
  eras: MemberEras,
  member: AskServer,
  req: MemberCall,
  caller: EraCaller,
  tasks: TaskIdSealer | undefined,
): Promise<{ readonly result: ForwardResult; readonly upstream: Upstream | undefined }> {
  const key = memberSessionKey(caller.session, caller.owner)
  const send = sender(member, req)
  const method = req.call.mcp.method
  const rewriters: ResultHook[] =
    caller.session === undefined
      ? [(m) => (isRecord(m.result) ? modernResult(m, method) : undefined)]
      : []
  for (let attempt = 0; ; attempt++) {
    const session = await eras.sessions.get(key, member.name, () =>
      initializeMember(send, caller.session),
    )
    const bare = withoutEnvelope(req.call.body)
    // A call that asks for progress also hears the session's own stream while it runs.
    const progress = ProgressRelay.of(bare, res)
    const body = progress?.body ?? bare
    const seen: Seen = { upstream: undefined }
    try {
      // Not a long-lived stream (no onStreamEnd): the send returns once the answer is over.
      const sent = await sendPlanned(
        member,
        { ...req.call, body, mcp: { ...req.call.mcp, era: 'legacy' } },
        res,
        {
          ...req.opts,
          rewriters,
          tasks: tasks ?? 'none',
          // SECURITY: a client's stream through a 2025-only member holds that caller's budget too.
          maxStreams: req.opts.maxStreams ?? Infinity,
          session: heldSession(session, session.pin),
          onHeaders: (status, h) => {
            member.balancing.onHeaders(status, h)
            // SECURITY: the member's session id is the gateway's business; the client has its own.
            delete h['mcp-session-id']
          },
          prepare:
            progress === undefined
              ? undefined
              : (plan) => progress.attach(plan, eras.streams, member, session),
        },
        seen,
      )
      if (sent.kind === 'answer') throw new GatewayError('internal', 'no in-band answer here')
      return { result: sent.result as ForwardResult, upstream: seen.upstream }
    } catch (err) {
      const gone = err instanceof GatewayError && err.code === 'session_not_found'
      if (!gone) throw err
      // The client's own session is fine: a member that loses a fresh session is at fault (502).
      if (attempt > 0) throw new GatewayError('upstream_bad_response', { cause: err })
      await eras.sessions.forget(key, member.name, session)
    } finally {
      progress?.close()
    }
  }
}

/** Ends this process's member sessions of a 2025-era client session (its DELETE). */
export async function endMemberSessions(
  eras: MemberEras,
  members: readonly AskServer[],
  session: ClientSession,
  log: Logger,
  virtualServer: string,
): Promise<void> {
  const ended = await eras.sessions.end(memberSessionKey(session, ''))
  await Promise.all(
    ended.map(async ([name, s]) => {
      const member = members.find((m) => m.name === name)
      if (member === undefined) return
      try {
        await endSession(member, s)
      } catch (err) {
        // The member forgets idle sessions on its own; a failed DELETE only leaves one to expire.
        log.debug({ virtualServer, member: name, err: String(err) }, 'member DELETE failed')
      }
    }),
  )
}

/**
 * Ends a session the gateway holds toward a 2025-era server (spec 2025-11-25 basic/transports
 * §Session Management: DELETE with its id), on the replica that holds it.
 */
export async function endSession(server: AskServer, s: MemberSession): Promise<void> {
  const up = (s.pin as Upstream | undefined) ?? server.balancing.pool.upstreams[0]
  if (up === undefined || s.sessionId === undefined) return
  const res = await up.dispatcher.request({
    origin: up.origin,
    path: up.path,
    method: 'DELETE',
    headers: outboundHeaders(server.upstreamHeaders, { http: 'DELETE', session: s }),
    headersTimeout: server.config.timeouts.responseHeadersMs,
    bodyTimeout: server.config.timeouts.responseHeadersMs,
  })
  await res.body.dump()
}
