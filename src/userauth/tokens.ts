import { LRUCache } from 'lru-cache'
import type { Principal } from '../auth/principal.js'
import type { UserTokenSource } from '../auth/user-tokens.js'
import { GatewayError } from '../errors.js'
import type { UserTokenAudit } from './audit.js'
import { checkRequestState, sealLink, sealRequestState, usedName } from './links.js'
import { OAuthFailure, type TokenAnswer } from './oauth.js'
import { openRecord, recordName, RECORD_TTL_MS, sealRecord, type TokenRecord } from './records.js'
import type { UserKeys } from './seal.js'
import type { ServiceClient } from './service.js'
import { StoreUnavailable, type TokenStore } from './store.js'

/** A record as this process last read or wrote it, and until when that copy is used as is. */
interface Held {
  readonly record: TokenRecord
  /** `Bearer <access>`, built once. */
  readonly auth: string
  /** Read the store again after this (Redis: another replica may have refreshed or revoked). */
  readonly freshUntil: number
  /** Refresh before sending after this (expiry minus `refreshBeforeMs`); Infinity: never. */
  readonly refreshAt: number
}

/** How long a replica uses its copy of a record from Redis before it reads it again. */
const SHARED_COPY_MS = 5_000
/** How often a retry that waits for the user to finish connecting looks at the store. */
const POLL_MS = 250

/** What the sources of one config share: the store, the keys, the copies of this process. */
export interface UserTokenContext {
  readonly store: TokenStore
  readonly keys: UserKeys
  /** `auth.publicUrl` without a trailing slash: where the connect page is. */
  readonly publicUrl: string
  readonly now: () => number
  readonly audit: UserTokenAudit
  /** Copies of records, by server and user (userauth/user-auth.ts; bounded). */
  readonly held: LRUCache<string, Held>
  /** Refreshes in flight, by server and user: one per user, however many calls need it. */
  readonly flights: Map<string, Promise<Held | undefined>>
  /** `userTokens.connectWaitMs`. */
  readonly connectWaitMs: number
}

/** The process's copies of records (bounded like the memory store). */
export function heldCopies(max: number): LRUCache<string, Held> {
  return new LRUCache<string, Held>({ max })
}

/**
 * The user's own token at one server's service (docs/auth.md §Per-user credentials): read from
 * the store, refreshed before it expires and once when the server refuses it, single flight per
 * user; dropped on `invalid_grant` or a second refusal, so the next call asks the user again.
 */
export class UserTokens implements UserTokenSource {
  readonly service: string

  constructor(
    readonly server: string,
    readonly client: ServiceClient,
    private readonly ctx: UserTokenContext,
    title: string | undefined,
  ) {
    this.service = title ?? server
  }

  authorization(p: Principal): Promise<string | undefined> {
    const key = heldKey(this.server, p)
    const held = this.ctx.held.get(key)
    const now = this.ctx.now()
    // The hot path: a copy that is fresh and not due for a refresh costs one map lookup.
    if (held !== undefined && now < held.freshUntil && now < held.refreshAt)
      return Promise.resolve(held.auth)
    return this.#slow(p, key, held, now)
  }

  async #slow(
    p: Principal,
    key: string,
    held: Held | undefined,
    now: number,
  ): Promise<string | undefined> {
    let h = held !== undefined && now < held.freshUntil ? held : await this.#load(p, key)
    if (h === undefined) return undefined
    if (now >= h.refreshAt) h = await this.#refreshed(p, key, h, false)
    return h?.auth
  }

  async refused(p: Principal, sent: string): Promise<string | undefined> {
    const key = heldKey(this.server, p)
    const h = await this.#load(p, key)
    if (h === undefined) return undefined
    // Another request (or replica) refreshed since `sent` went out: its token is the one to try.
    if (h.auth !== sent) return h.auth
    return (await this.#refreshed(p, key, h, true))?.auth
  }

  /** The server refused the refreshed token too: it is dropped and the user asked again. */
  async drop(p: Principal, reason: string): Promise<void> {
    await this.#drop(p, heldKey(this.server, p), reason)
  }

  async connected(p: Principal, waitMs: number): Promise<string | undefined> {
    const key = heldKey(this.server, p)
    const until = this.ctx.now() + waitMs
    for (;;) {
      const h = await this.#load(p, key)
      if (h !== undefined) return h.auth
      if (this.ctx.now() + POLL_MS > until) return undefined
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    }
  }

  connectUrl(p: Principal): string {
    const { sealed } = sealLink(this.ctx.keys, p.issuer, p.subject, this.server, this.ctx.now())
    const server = encodeURIComponent(this.server)
    return `${this.ctx.publicUrl}/connect/${server}?state=${sealed}`
  }

  requestState(p: Principal, method: string): string {
    const keys = this.ctx.keys
    return sealRequestState(keys, p.issuer, p.subject, this.server, method, this.ctx.now())
  }

  issued(p: Principal, method: string, state: string): boolean {
    const { keys, now } = this.ctx
    return checkRequestState(keys, state, p.issuer, p.subject, this.server, method, now())
  }

  get connectWaitMs(): number {
    return this.ctx.connectWaitMs
  }

  /** Stores what the connect page obtained (userauth/connect.ts). */
  async connect(iss: string, sub: string, answer: TokenAnswer): Promise<void> {
    const now = this.ctx.now()
    const record: TokenRecord = {
      iss,
      sub,
      server: this.server,
      access: answer.accessToken,
      refresh: answer.refreshToken,
      expiresAt: answer.expiresIn === undefined ? undefined : now + answer.expiresIn * 1000,
      scope: answer.scope,
      connectedAt: now,
    }
    await this.#write(heldKey(this.server, { issuer: iss, subject: sub }), record)
    this.ctx.audit({ action: 'connect', iss, sub, server: this.server })
  }

  /** Forgets this process's copy of a user's record (revoked from the store). */
  forget(iss: string, sub: string): void {
    this.ctx.held.delete(heldKey(this.server, { issuer: iss, subject: sub }))
  }

  /** Marks a link used; false when it was used before (a link works once). */
  claimLink(id: string, ttlMs: number): Promise<boolean> {
    return this.ctx.store.claim(usedName(id), ttlMs)
  }

  /** The store's copy, opened, or undefined (none, or unreadable: another key). */
  async #load(p: Pick<Principal, 'issuer' | 'subject'>, key: string): Promise<Held | undefined> {
    const name = recordName(this.ctx.keys, this.server, p.issuer, p.subject)
    let sealed: string | undefined
    try {
      sealed = await this.ctx.store.get(name)
    } catch (err) {
      throw unavailable(err)
    }
    const record = sealed === undefined ? undefined : openRecord(this.ctx.keys, name, sealed)
    // SECURITY: a record of another user or server never opens here (sealed for its own name),
    // and one that names another user than asked is not used either.
    if (record === undefined || record.iss !== p.issuer || record.sub !== p.subject) {
      this.ctx.held.delete(key)
      return undefined
    }
    return this.#hold(key, record)
  }

  #hold(key: string, record: TokenRecord): Held {
    const now = this.ctx.now()
    const due =
      record.expiresAt === undefined ? Infinity : record.expiresAt - this.client.refreshBeforeMs
    const held: Held = {
      record,
      auth: `Bearer ${record.access}`,
      freshUntil: this.ctx.store.kind === 'redis' ? now + SHARED_COPY_MS : Infinity,
      refreshAt: due,
    }
    this.ctx.held.set(key, held)
    return held
  }

  /**
   * A refreshed copy, one refresh per user at a time in this process. `refused`: the server
   * refused the token, so it is not used again whatever its expiry says.
   */
  #refreshed(p: Principal, key: string, h: Held, refused: boolean): Promise<Held | undefined> {
    let flight = this.ctx.flights.get(key)
    if (flight === undefined) {
      flight = this.#refresh(p, key, h, refused).finally(() => this.ctx.flights.delete(key))
      this.ctx.flights.set(key, flight)
    }
    return flight
  }

  async #refresh(p: Principal, key: string, h: Held, refused: boolean): Promise<Held | undefined> {
    const { record } = h
    const expired = record.expiresAt !== undefined && this.ctx.now() >= record.expiresAt
    if (record.refresh === undefined) {
      if (!refused && !expired) return h
      await this.#drop(p, key, refused ? 'upstream_401' : 'expired')
      return undefined
    }
    // Replicas sharing a store refresh one at a time: a refresh token used twice may be taken
    // for a stolen one and the whole grant revoked (RFC 9700 §4.14.2).
    const lock = lockName(recordName(this.ctx.keys, this.server, p.issuer, p.subject))
    const other = await this.#otherReplica(p, key, h, lock)
    if (other !== 'ours') return other
    let answer: TokenAnswer
    try {
      answer = await this.client.refresh(record.refresh)
    } catch (err) {
      await this.ctx.store.delete(lock).catch(() => undefined)
      if (err instanceof OAuthFailure && err.invalidGrant) {
        await this.#drop(p, key, 'invalid_grant')
        return undefined
      }
      // The AS is down: a token that still works is used; one that does not fails closed.
      if (!refused && !expired) return h
      throw new GatewayError('user_token_unavailable', { cause: err })
    }
    const next: TokenRecord = {
      ...record,
      access: answer.accessToken,
      // RFC 6749 §6: the AS may issue a new refresh token; else the old one stays valid.
      refresh: answer.refreshToken ?? record.refresh,
      expiresAt:
        answer.expiresIn === undefined ? undefined : this.ctx.now() + answer.expiresIn * 1000,
      scope: answer.scope ?? record.scope,
      refreshedAt: this.ctx.now(),
    }
    const held = await this.#write(key, next)
    await this.ctx.store.delete(lock).catch(() => undefined)
    this.ctx.audit({ action: 'refresh', iss: p.issuer, sub: p.subject, server: this.server })
    return held
  }

  /**
   * 'ours' once this process holds the refresh lock and the store still has the token it meant
   * to refresh; else what another replica left: its refreshed copy, or none (dropped).
   */
  async #otherReplica(
    p: Principal,
    key: string,
    h: Held,
    lock: string,
  ): Promise<Held | undefined | 'ours'> {
    if (this.ctx.store.kind === 'memory') return 'ours'
    const until = this.ctx.now() + this.client.timeoutMs
    for (;;) {
      let mine: boolean
      try {
        mine = await this.ctx.store.claim(lock, this.client.timeoutMs * 2)
      } catch (err) {
        throw unavailable(err)
      }
      const now = await this.#load(p, key)
      if (now === undefined || now.auth !== h.auth) {
        if (mine) await this.ctx.store.delete(lock).catch(() => undefined)
        return now
      }
      if (mine) return 'ours'
      if (this.ctx.now() + POLL_MS > until) return 'ours'
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    }
  }

  async #write(key: string, record: TokenRecord): Promise<Held> {
    const name = recordName(this.ctx.keys, this.server, record.iss, record.sub)
    try {
      await this.ctx.store.set(name, sealRecord(this.ctx.keys, name, record), RECORD_TTL_MS)
    } catch (err) {
      throw unavailable(err)
    }
    return this.#hold(key, record)
  }

  async #drop(p: Pick<Principal, 'issuer' | 'subject'>, key: string, reason: string) {
    this.ctx.held.delete(key)
    try {
      await this.ctx.store.delete(recordName(this.ctx.keys, this.server, p.issuer, p.subject))
    } catch (err) {
      throw unavailable(err)
    }
    this.ctx.audit({ action: 'drop', iss: p.issuer, sub: p.subject, server: this.server, reason })
  }
}

/** The process's key of a user's copy at a server (the issuer's length keeps `a`+`bc` apart). */
function heldKey(server: string, p: Pick<Principal, 'issuer' | 'subject'>): string {
  return `${server}\n${p.issuer.length}:${p.issuer}${p.subject}`
}

const lockName = (name: string): string => `l:${name}`

function unavailable(err: unknown): unknown {
  return err instanceof StoreUnavailable
    ? new GatewayError('user_token_unavailable', { cause: err })
    : err
}
