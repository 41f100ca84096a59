import { LRUCache } from 'lru-cache'

/** What a member said to the gateway's own `initialize` (spec 2025-11-25 basic/lifecycle). */
export interface MemberSession {
  /** The member's `Mcp-Session-Id`; undefined for a member that issues none (stateless). */
  readonly sessionId: string | undefined
  /** The protocol version the member agreed to: sent as MCP-Protocol-Version from then on. */
  readonly version: string
  /** What the member said it can do (its `initialize` result), for the merged discovery. */
  readonly capabilities?: Readonly<Record<string, unknown>> | undefined
  /** The member's `instructions` (its `initialize` result), for the merged discovery. */
  readonly instructions?: string | undefined
  /** The member replica that holds the session: later requests go there (pinned). */
  readonly pin?: unknown
}

/** Initialises one member for one client session; rejects when the member cannot be reached. */
export type MemberInit = () => Promise<MemberSession>

/**
 * Sessions the gateway holds toward 2025-era members, per (client session, member), in this
 * process only (docs/virtual-servers.md "2025-era clients"). Nothing here is shared between
 * gateway replicas or survives a restart: a replica that has no session for a member initialises
 * one on first use, and a member that answers 404 for its session (it restarted or expired it,
 * spec 2025-11-25 basic/transports §Session Management) is initialised again. Bounded: the least
 * recently used client sessions are forgotten first, which costs them one `initialize` per member
 * on their next request. A 2026-07-28 client has no session: its member sessions are kept per
 * caller (client/era-session.ts memberSessionKey).
 */
export class MemberSessions {
  private readonly byClient: LRUCache<string, Map<string, Promise<MemberSession>>>

  constructor(maxClientSessions = 10_000) {
    this.byClient = new LRUCache({ max: maxClientSessions })
  }

  /**
   * The member's session for `client`, initialising it once however many requests ask at the
   * same time. A failed initialisation is forgotten, so the next request tries again.
   */
  get(client: string, member: string, init: MemberInit): Promise<MemberSession> {
    let members = this.byClient.get(client)
    if (members === undefined) {
      members = new Map()
      this.byClient.set(client, members)
    }
    const held = members.get(member)
    if (held !== undefined) return held
    const started = init()
    members.set(member, started)
    started.catch(() => {
      if (members.get(member) === started) members.delete(member)
    })
    return started
  }

  /** Forgets one member's session (it answered 404 for it): the next get() initialises anew. */
  async forget(client: string, member: string, stale: MemberSession): Promise<void> {
    const members = this.byClient.get(client)
    const held = members?.get(member)
    if (members === undefined || held === undefined) return
    // Only the session that failed: another request may already have replaced it.
    const current = await held.catch(() => undefined)
    if (current === stale && members.get(member) === held) members.delete(member)
  }

  /**
   * Removes a client session and hands back the member sessions it had in this process, so the
   * caller can end them (DELETE, spec 2025-11-25 basic/transports §Session Management).
   */
  async end(client: string): Promise<[member: string, session: MemberSession][]> {
    const members = this.byClient.get(client)
    this.byClient.delete(client)
    if (members === undefined) return []
    const out: [string, MemberSession][] = []
    for (const [member, p] of members) {
      try {
        out.push([member, await p])
      } catch {
        // never initialised: nothing to end
      }
    }
    return out
  }

  /** Client sessions held right now (tests, metrics). */
  get size(): number {
    return this.byClient.size
  }
}
