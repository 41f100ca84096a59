import type { Logger } from 'pino'
import type { UserTokenProvider } from '../auth/user-tokens.js'
import type { GatewayConfig } from '../config/schema.js'
import { createUserTokenAudit, type UserTokenAudit } from './audit.js'
import { ConnectFlow } from './connect.js'
import { GatewaySignIn } from './login.js'
import { openRecord, RECORD_PREFIX, serverOfName, type TokenRecord } from './records.js'
import { deriveKeys, type UserKeys } from './seal.js'
import { ServiceClient } from './service.js'
import { MemoryStore, RedisStore, type TokenStore } from './store.js'
import { heldCopies, UserTokens, type UserTokenContext } from './tokens.js'

/** Options of the gateway's user-token state; tests set the clock. */
export interface UserAuthOptions {
  readonly log?: Logger | undefined
  readonly now?: (() => number) | undefined
}

/** What one config compiles to: its sources (one per `userAuth` server) and its connect flow. */
interface Compiled {
  readonly keys: UserKeys
  readonly store: TokenStore
  readonly sources: ReadonlyMap<string, UserTokens>
  readonly flow: ConnectFlow
}

/** One connected user at one server, as the status page and `mcp-edge tokens list` show it. */
export interface Connection {
  readonly server: string
  /** Undefined when the record does not open with the current key (rotated, or another). */
  readonly iss?: string | undefined
  readonly sub?: string | undefined
  readonly connectedAt?: number | undefined
  readonly refreshedAt?: number | undefined
  readonly expiresAt?: number | undefined
  readonly refreshable?: boolean | undefined
  /** The store name (never a token); what `revoke` removes. */
  readonly name: string
}

/**
 * The gateway's per-user token state (docs/auth.md §Per-user credentials): the store (memory, or
 * Redis shared by replicas) outlives config reloads while its settings stay; the key, the sources
 * and the connect flow are compiled per config. It is the `UserTokenProvider` auth/ compiles
 * `userAuth` servers with, and what the connect routes, the status page and the CLI use.
 */
export class UserAuth implements UserTokenProvider {
  readonly #compiled = new WeakMap<GatewayConfig, Compiled>()
  readonly #stores = new Map<string, TokenStore>()
  readonly #log: Logger | undefined
  readonly #now: () => number
  readonly #audit: UserTokenAudit

  constructor(opts: UserAuthOptions = {}) {
    this.#log = opts.log
    this.#now = opts.now ?? Date.now
    this.#audit = opts.log === undefined ? () => {} : createUserTokenAudit(opts.log)
  }

  sourceFor(server: string, config: GatewayConfig): UserTokens {
    const source = this.compile(config)?.sources.get(server)
    if (source === undefined) throw new Error(`servers.${server}.userAuth: not compiled`)
    return source
  }

  /** The connect flow of `config`; undefined when it has no `userTokens`. */
  flow(config: GatewayConfig): ConnectFlow | undefined {
    return this.compile(config)?.flow
  }

  /** The config compiled once (the same object is asked for at every request of its runtime). */
  compile(config: GatewayConfig): Compiled | undefined {
    const held = this.#compiled.get(config)
    if (held !== undefined) return held
    const ut = config.userTokens
    const auth = config.auth
    if (ut === undefined || auth === undefined) return undefined
    const keys = deriveKeys(ut.key)
    const store = this.#storeFor(config)
    const publicUrl = auth.publicUrl.replace(/\/+$/, '')
    const ctx: UserTokenContext = {
      store,
      keys,
      publicUrl,
      now: this.#now,
      audit: this.#audit,
      held: heldCopies(ut.maxEntries),
      flights: new Map(),
      connectWaitMs: ut.connectWaitMs,
    }
    const sources = new Map<string, UserTokens>()
    for (const [name, s] of Object.entries(config.servers)) {
      if (s.userAuth === undefined) continue
      const client = new ServiceClient(s.userAuth, s.upstreams[0]?.url ?? '')
      sources.set(name, new UserTokens(name, client, ctx, s.userAuth.title))
    }
    const login = ut.login
    const signIn = new GatewaySignIn(
      { clientId: login.clientId, clientSecret: login.clientSecret },
      5000,
      this.#now,
    )
    const flow = new ConnectFlow({
      store,
      keys,
      publicUrl,
      now: this.#now,
      signIn,
      sources,
      log: this.#log,
    })
    const compiled = { keys, store, sources, flow }
    this.#compiled.set(config, compiled)
    return compiled
  }

  /**
   * Every stored record of `config`'s store, opened with its key where it opens. Values never
   * leave: a connection names the user, the server and the times.
   */
  async connections(config: GatewayConfig): Promise<Connection[]> {
    const c = this.compile(config)
    if (c === undefined) return []
    return listConnections(c.store, c.keys)
  }

  /**
   * Removes the stored tokens of the connections that match, revoking them at the service's AS
   * where it has an RFC 7009 endpoint (best effort: the store is cleared either way).
   */
  async revoke(config: GatewayConfig, match: (c: Connection) => boolean): Promise<Connection[]> {
    const c = this.compile(config)
    if (c === undefined) return []
    const found = (await this.connections(config)).filter(match)
    for (const conn of found) await revokeOne(c, conn, this.#audit, this.#log)
    return found
  }

  /**
   * Where `config` keeps tokens, and whether it answers: `memory` (this process only), or a Redis
   * store once connected (false when it did not connect within `timeoutMs`).
   */
  async store(
    config: GatewayConfig,
    timeoutMs: number,
  ): Promise<{ readonly kind: 'memory' | 'redis'; readonly ready: boolean } | undefined> {
    const store = this.compile(config)?.store
    if (store === undefined) return undefined
    if (!(store instanceof RedisStore)) return { kind: 'memory', ready: true }
    return { kind: 'redis', ready: await store.ready(timeoutMs) }
  }

  async close(): Promise<void> {
    await Promise.all([...this.#stores.values()].map((s) => s.close()))
    this.#stores.clear()
  }

  #storeFor(config: GatewayConfig): TokenStore {
    const ut = config.userTokens
    const url = ut?.redis === 'cache' ? config.cache?.redis : ut?.redis
    const id = url === undefined ? `memory:${ut?.maxEntries}` : `redis:${url}`
    let store = this.#stores.get(id)
    if (store === undefined) {
      store =
        url === undefined
          ? new MemoryStore(ut?.maxEntries ?? 100_000)
          : new RedisStore(url, this.#log, this.#now)
      this.#stores.set(id, store)
    }
    return store
  }
}

/** The records of a store; those that do not open with `keys` are listed without a user. */
async function listConnections(store: TokenStore, keys: UserKeys): Promise<Connection[]> {
  const out: Connection[] = []
  for (const { name, value } of await store.entries(RECORD_PREFIX)) {
    const server = serverOfName(name)
    if (server === undefined) continue
    const r: TokenRecord | undefined = openRecord(keys, name, value)
    out.push(
      r === undefined
        ? { server, name }
        : {
            server,
            name,
            iss: r.iss,
            sub: r.sub,
            connectedAt: r.connectedAt,
            refreshedAt: r.refreshedAt,
            expiresAt: r.expiresAt,
            refreshable: r.refresh !== undefined,
          },
    )
  }
  return out.sort((a, b) => (a.server + (a.sub ?? '')).localeCompare(b.server + (b.sub ?? '')))
}

/** RFC 7009 at the AS (refresh token first: it ends the grant), then the store; audited. */
async function revokeOne(
  c: Pick<Compiled, 'keys' | 'store' | 'sources'>,
  conn: Connection,
  audit: UserTokenAudit,
  log: Logger | undefined,
): Promise<void> {
  const source = c.sources.get(conn.server)
  const sealed = await c.store.get(conn.name)
  const record = sealed === undefined ? undefined : openRecord(c.keys, conn.name, sealed)
  if (source !== undefined && record !== undefined) {
    try {
      if (record.refresh !== undefined) await source.client.revoke(record.refresh, 'refresh_token')
      await source.client.revoke(record.access, 'access_token')
    } catch (err) {
      log?.warn(
        { server: conn.server, err: err instanceof Error ? err.message : 'failed' },
        'userTokens: revocation at the authorization server failed; the stored token is removed',
      )
    }
  }
  await c.store.delete(conn.name)
  if (record !== undefined) source?.forget(record.iss, record.sub)
  if (record !== undefined)
    audit({ action: 'revoke', iss: record.iss, sub: record.sub, server: conn.server })
}
