import type { Logger } from 'pino'
import type { Principal } from '../auth/principal.js'
import { isRecord } from '../mcp/jsonrpc.js'
import type { ServerRuntime, VirtualRuntime } from '../runtime/runtime.js'
import { UpstreamFailure } from '../upstream/failure.js'
import type { Upstream } from '../upstream/upstream.js'
import type { VirtualSession } from '../virtual/client-session.js'
import { callMember, type MemberAnswer, type MemberRequest } from '../virtual/member-call.js'
import {
  initializeMember,
  memberSessionKey,
  sendInLegacySession,
  type MemberEra,
  type MemberSend,
} from '../virtual/member-era.js'
import { MemberSessions } from '../virtual/member-sessions.js'

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

/**
 * The client's answer from a 2025-only member's: its result with `resultType`, or its error, under
 * the client's request id byte for byte.
 */
export function answerBody(
  rawId: string,
  method: string,
  message: Readonly<Record<string, unknown>>,
): string {
  const m = modernResult(message, method)
  const part =
    m.result !== undefined
      ? `"result":${JSON.stringify(m.result)}`
      : `"error":${JSON.stringify(m.error ?? { code: -32603, message: 'no answer' })}`
  return `{"jsonrpc":"2.0","id":${rawId},${part}}`
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
  const send: MemberSend = async (headers, body, rawId, pin) => {
    const a = await callMember(member, {
      ...req,
      headers,
      body,
      rawId: rawId ?? '""',
      pinned: pin as Upstream | undefined,
    })
    return { status: a.status, message: a.message, sessionId: a.sessionId, pin: a.upstream }
  }
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
