import type { GatewayConfig, JwtConfig, ServerConfig } from '../config/schema.js'
import type { IntrospectionConfig } from '../config/user-auth-schema.js'
import type { Clock } from './clock.js'
import { createKeySource, isRemote, type KeySource } from './key-source.js'
import { Introspector, type IntrospectionOptions } from './introspection.js'
import { createTokenExchanger, type TokenExchanger } from './token-exchange.js'
import { NO_USER_TOKENS, type UserTokenProvider, type UserTokenSource } from './user-tokens.js'

type TokenExchangeConfig = NonNullable<ServerConfig['tokenExchange']>

/** Settings of the auth state as a whole; tests use them. */
export interface AuthStateOptions {
  /** Clock for key-cache ages, cooldowns, backoff, token expiry and remembered checks. */
  readonly now?: Clock
  /** The per-user token store of a running gateway (src/userauth/), for `userAuth` servers. */
  readonly users?: UserTokenProvider | undefined
}

/**
 * Auth state that outlives config reloads while its settings stay the same: fetched JWKS keys and
 * exchanged tokens. Without it every policy edit would start from a cold key cache, and during an
 * identity-provider outage that edit alone would turn working auth into 503s.
 */
export class AuthCarryOver {
  #keys = new Map<string, KeySource>()
  #exchangers = new Map<string, TokenExchanger>()
  #nextKeys = new Map<string, KeySource>()
  #nextExchangers = new Map<string, TokenExchanger>()
  #introspector: { readonly id: string; readonly it: Introspector } | undefined
  #nextIntrospector: { readonly id: string; readonly it: Introspector } | undefined
  /** The clock every key source and verifier built from this state reads. */
  readonly now: Clock
  readonly #users: UserTokenProvider | undefined

  constructor(opts: AuthStateOptions = {}) {
    this.now = opts.now ?? Date.now
    this.#users = opts.users
  }

  /**
   * The user-token source of a `userAuth` server. The store behind it outlives reloads (it is the
   * gateway's); without one every request to the server fails closed.
   */
  userTokens(server: string, config: GatewayConfig): UserTokenSource {
    return this.#users?.sourceFor(server, config) ?? NO_USER_TOKENS
  }

  /**
   * The remote key source for these settings, reused when unchanged; key files are re-read. The
   * source is carried whole, jose's resolver and its `jwksCache` with it, not only that cache:
   * a resolver rebuilt from the cache per config would let the old and the new config fetch at
   * once during a reload and would restart the unknown-`kid` cooldown and the failure backoff.
   */
  keySource(jwt: JwtConfig, dir: string): KeySource {
    if (!isRemote(jwt)) return createKeySource(jwt, dir, { now: this.now })
    const { jwksUrl, jwksTimeoutMs, jwksCooldownMs, jwksCacheMaxAgeMs } = jwt
    // A discovered set is found from the issuer: the same issuer, the same set.
    const where = jwksUrl ?? { discoveredFrom: jwt.issuer }
    const id = JSON.stringify([where, jwksTimeoutMs, jwksCooldownMs, jwksCacheMaxAgeMs])
    const source =
      this.#keys.get(id) ?? this.#nextKeys.get(id) ?? createKeySource(jwt, dir, { now: this.now })
    this.#nextKeys.set(id, source)
    return source
  }

  /** The exchanger (and its token cache) of one server, reused when its settings are unchanged. */
  exchanger(server: string, cfg: TokenExchangeConfig): TokenExchanger {
    const id = JSON.stringify([server, cfg])
    const ex = this.#exchangers.get(id) ?? this.#nextExchangers.get(id) ?? createTokenExchanger(cfg)
    this.#nextExchangers.set(id, ex)
    return ex
  }

  /**
   * The introspector (its remembered answers and breaker) of `auth.introspection`, reused while
   * its settings and the accepted issuers are unchanged.
   */
  introspector(cfg: IntrospectionConfig, opts: IntrospectionOptions): Introspector {
    const id = JSON.stringify([cfg, opts.issuers, opts.clockToleranceSec])
    const held = this.#introspector?.id === id ? this.#introspector : undefined
    const next = held ?? { id, it: new Introspector(cfg, opts) }
    this.#nextIntrospector = next
    return next.it
  }

  /** Keeps only what the latest compile used, so settings that went away free their state. */
  commit(): void {
    this.#introspector = this.#nextIntrospector
    this.#nextIntrospector = undefined
    this.#keys = this.#nextKeys
    this.#exchangers = this.#nextExchangers
    this.#nextKeys = new Map()
    this.#nextExchangers = new Map()
  }
}
