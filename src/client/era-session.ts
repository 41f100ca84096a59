import { GATEWAY_INFO, LEGACY_VERSION } from '../mcp/protocol.js'
import type { MemberSession, MemberSessions } from './member-sessions.js'
import { outboundHeaders } from '../mcp/outbound.js'

/** The era a member speaks: 2026-07-28 (sessionless), or only 2025 (`initialize` and a session). */
export type MemberEra = 'modern' | 'legacy'

/** A member's answer as the era layer needs it. */
export interface EraAnswer {
  readonly status: number
  readonly message: Record<string, unknown> | undefined
  /** The member's `Mcp-Session-Id` response header, when it sent one. */
  readonly sessionId?: string | undefined
  /** The replica that answered (a session lives on one). */
  readonly pin?: unknown
}

/** The gateway's 2025-era client session (virtual/client-session.ts), as far as members see it. */
export interface ClientSession {
  readonly id: string
  readonly version: string
  readonly capabilities: Readonly<Record<string, unknown>>
  readonly clientInfo: { readonly name: string; readonly version: string }
}

/** The era and session a message goes in: what legacyHeaders puts on its header list. */
export type SessionHeaders = Pick<MemberSession, 'sessionId' | 'version'>

/**
 * Sends one message to the member through its own path (client/ask.ts), its header list
 * carrying `session` (legacyHeaders), to the replica `pin` when set.
 */
export type MemberSend = (
  session: SessionHeaders,
  body: Buffer,
  rawId: string | undefined,
  pin?: unknown,
) => Promise<EraAnswer>

const INIT_ID = 'mcp-edge-initialize'
/**
 * The member-session key: the client's own 2025-era session, or, for a 2026-07-28 client (which
 * has none), one per caller, so the gateway's session toward a 2025-only member is never shared
 * between principals (docs/virtual-servers.md "2025-era clients").
 */
export function memberSessionKey(client: ClientSession | undefined, owner: string): string {
  return client === undefined ? `modern\0${owner}` : `session\0${client.id}`
}

/**
 * The header list of a message in a 2025-only member's session: the member request's list with
 * its era and session headers replaced (spec 2025-11-25 basic/transports), by the one builder of
 * the gateway's own requests (mcp/outbound.ts).
 */
export function legacyHeaders(headers: readonly string[], session: SessionHeaders): string[] {
  return outboundHeaders(headers, { http: 'POST', session })
}

/**
 * Client capabilities that are answers to server-to-client requests (spec 2025-11-25
 * client/roots, client/sampling, client/elicitation, and tasks for those requests). The gateway's
 * session with a member cannot carry the client's answers back (docs/virtual-servers.md §2025-era
 * clients), so announcing them would make a member wait for an answer that never comes.
 */
const REQUEST_CAPABILITIES = new Set(['roots', 'sampling', 'elicitation', 'tasks'])

/** The client's capabilities without those the member could only use through requests. */
function relayable(caps: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(caps ?? {})) if (!REQUEST_CAPABILITIES.has(k)) out[k] = v
  return out
}

/**
 * Runs the `initialize` handshake with a 2025-only member on the client's behalf (spec 2025-11-25
 * basic/lifecycle §Initialization): the client's version, capabilities it can use through the
 * gateway (`relayable`) and info when it is a 2025-era client, the gateway's own otherwise; then
 * `notifications/initialized`.
 */
export async function initializeMember(
  send: MemberSend,
  client: ClientSession | undefined,
): Promise<MemberSession> {
  // What the gateway asks a 2025-only member for when the client gave no version of its own.
  const version = client?.version ?? LEGACY_VERSION
  const params = {
    protocolVersion: version,
    capabilities: relayable(client?.capabilities),
    clientInfo: client?.clientInfo ?? GATEWAY_INFO,
  }
  const init = Buffer.from(
    JSON.stringify({ jsonrpc: '2.0', id: INIT_ID, method: 'initialize', params }),
  )
  const answer = await send({ sessionId: undefined, version }, init, JSON.stringify(INIT_ID))
  const result = answer.message?.result
  if (answer.status !== 200 || typeof result !== 'object' || result === null)
    throw new Error(`member refused initialize (HTTP ${answer.status})`)
  const agreed = (result as Record<string, unknown>).protocolVersion
  const caps = (result as Record<string, unknown>).capabilities
  const instructions = (result as Record<string, unknown>).instructions
  const session: MemberSession = {
    sessionId: answer.sessionId,
    version: typeof agreed === 'string' ? agreed : version,
    capabilities:
      typeof caps === 'object' && caps !== null ? (caps as Record<string, unknown>) : {},
    instructions: typeof instructions === 'string' ? instructions : undefined,
    pin: answer.pin,
  }
  const note = Buffer.from('{"jsonrpc":"2.0","method":"notifications/initialized"}')
  // A notification is answered 202 without a body; what matters is that it was delivered.
  await send(session, note, undefined, session.pin).catch(() => undefined)
  return session
}

/**
 * Sends a request to a 2025-only member within the member session of `key`, initialising it first
 * when this gateway process has none, and once more when the member answers 404 (it no longer
 * knows the session: spec 2025-11-25 basic/transports §Session Management says the client then
 * starts a new one).
 */
export async function sendInLegacySession(
  sessions: MemberSessions,
  key: string,
  member: string,
  client: ClientSession | undefined,
  send: MemberSend,
  body: Buffer,
  rawId: string,
): Promise<EraAnswer & { readonly session: MemberSession }> {
  for (let attempt = 0; ; attempt++) {
    const session = await sessions.get(key, member, () => initializeMember(send, client))
    const answer = await send(session, body, rawId, session.pin)
    if (answer.status !== 404 || attempt > 0) return { ...answer, session }
    await sessions.forget(key, member, session)
  }
}
