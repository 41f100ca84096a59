import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { IntrospectionConfig } from '../config/user-auth-schema.js'
import { Breaker, BREAKER_DEFAULTS } from '../redis/breaker.js'
import { fetchBounded } from './bounded-fetch.js'
import type { Clock } from './clock.js'
import { fetchIssuerMetadata } from './discovery.js'
import { AuthFailure } from './failure.js'
import type { Principal } from './principal.js'
import { scopesOf, type Verifier } from './verifier.js'

/** An introspection answer is a few hundred bytes; anything past this is refused as it streams in. */
const MAX_ANSWER_BYTES = 64 * 1024

/** An active answer, and until when it is reused (cacheMs, never past its `exp`). */
interface Remembered {
  readonly answer: Readonly<Record<string, unknown>>
  readonly until: number
}

/** Settings outside `auth.introspection`. */
export interface IntrospectionOptions {
  /** The `iss` values accepted (`auth.jwt.issuer`, and `introspection.issuer`). */
  readonly issuers: readonly string[]
  /** The slack on `exp` and `nbf` (`auth.jwt.clockToleranceSec`, else 0). */
  readonly clockToleranceSec: number
  readonly now: Clock
}

/**
 * RFC 7662 token introspection, for access tokens that are not JWTs (docs/auth.md §Opaque
 * tokens): the AS says whether the token is active and what it carries, and the answer feeds the
 * same checks as a JWT's claims (audience, scopes, client application, policy claims).
 * - An active answer is remembered by a SHA-256 of the token (the token itself is never a key)
 *   for at most `cacheMs`, and never past its `exp`; inactive answers are never remembered, so a
 *   token that becomes active is seen at once and a revoked one is refused within `cacheMs`.
 * - Concurrent checks of one token share one request (single flight).
 * - Each request is bounded (`timeoutMs` for the whole exchange, 64 KiB, no redirects), and a
 *   circuit breaker stops asking an endpoint that keeps failing; either way the token is not
 *   accepted: 503 `auth_unavailable`, never a 401 that would make clients drop good tokens.
 */
export class Introspector {
  readonly #cfg: IntrospectionConfig
  readonly #opts: IntrospectionOptions
  readonly #cache: LRUCache<string, Remembered> | undefined
  readonly #pending = new Map<string, Promise<Readonly<Record<string, unknown>>>>()
  readonly #breaker: Breaker
  /** The endpoint: configured, or the issuer metadata's `introspection_endpoint`. */
  #url: Promise<string> | undefined

  constructor(cfg: IntrospectionConfig, opts: IntrospectionOptions) {
    this.#cfg = cfg
    this.#opts = opts
    this.#cache = cfg.cacheMs === 0 ? undefined : new LRUCache({ max: cfg.cacheSize })
    this.#breaker = new Breaker({ ...BREAKER_DEFAULTS, now: opts.now })
    if (cfg.url !== undefined) this.#url = Promise.resolve(cfg.url)
  }

  /** The caller this token stands for at `audience`, or AuthFailure. */
  async principal(token: string, audience: string | readonly string[]): Promise<Principal> {
    const key = createHash('sha256').update(token).digest('base64url')
    const now = this.#opts.now()
    const hit = this.#cache?.get(key)
    let answer: Readonly<Record<string, unknown>>
    if (hit !== undefined && now < hit.until) answer = hit.answer
    else {
      let flight = this.#pending.get(key)
      if (flight === undefined) {
        flight = this.#ask(token).finally(() => this.#pending.delete(key))
        this.#pending.set(key, flight)
      }
      answer = await flight
    }
    const principal = this.#judge(answer, token, audience)
    if (hit === undefined && this.#cache !== undefined) {
      const exp = typeof answer['exp'] === 'number' ? answer['exp'] * 1000 : Infinity
      const until = Math.min(this.#opts.now() + this.#cfg.cacheMs, exp)
      // SECURITY: never remembered past `exp`; only active answers get here (#judge).
      if (until > this.#opts.now()) this.#cache.set(key, { answer, until })
    }
    return principal
  }

  /** The checks a JWT's claims get (auth/verifier.ts), on the answer's members (RFC 7662 §2.2). */
  #judge(
    answer: Readonly<Record<string, unknown>>,
    token: string,
    audience: string | readonly string[],
  ): Principal {
    // SECURITY: RFC 7662 §2.2: `active` is the one required member; anything but true refuses.
    if (answer['active'] !== true) throw new AuthFailure('invalid_token', 'token not active')
    const now = this.#opts.now() / 1000
    const slack = this.#opts.clockToleranceSec
    const exp = answer['exp']
    if (typeof exp === 'number' && exp + slack <= now)
      throw new AuthFailure('invalid_token', 'token expired')
    const nbf = answer['nbf']
    if (typeof nbf === 'number' && nbf - slack > now)
      throw new AuthFailure('invalid_token', 'token not yet valid')
    const iss = typeof answer['iss'] === 'string' ? answer['iss'] : this.#cfg.issuer
    // SECURITY: a token another issuer vouches for is refused as a JWT with another `iss` is.
    if (iss === undefined || !this.#opts.issuers.includes(iss))
      throw new AuthFailure('invalid_token', 'wrong iss')
    // SECURITY: RFC 8707 audience binding, as for JWTs: a token for another resource (or one
    // whose answer names none) does not work here.
    const aud = answer['aud']
    const auds = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : []
    const accepted = typeof audience === 'string' ? [audience] : audience
    if (!auds.some((a) => typeof a === 'string' && accepted.includes(a)))
      throw new AuthFailure('invalid_token', 'wrong aud')
    const claims = { ...answer, iss }
    return {
      subject: typeof answer['sub'] === 'string' ? answer['sub'] : '',
      issuer: iss,
      claims,
      scopes: scopesOf(claims),
      token,
    }
  }

  async #ask(token: string): Promise<Readonly<Record<string, unknown>>> {
    const pass = this.#breaker.allow()
    // SECURITY: fail closed, at once, while the endpoint keeps failing.
    if (pass === undefined)
      throw new AuthFailure('unavailable', 'introspection unavailable', this.#retryAfter())
    let text: string
    try {
      const url = await this.#endpoint()
      ;({ text } = await fetchBounded(url, this.#request(token)))
    } catch (err) {
      this.#breaker.failedWith(pass === 'probe')
      // The endpoint may have moved: discovery runs again next time.
      if (this.#cfg.url === undefined) this.#url = undefined
      const retry = this.#retryAfter()
      throw new AuthFailure('unavailable', 'introspection unavailable', retry, { cause: err })
    }
    this.#breaker.succeeded()
    try {
      const answer: unknown = JSON.parse(text)
      if (typeof answer === 'object' && answer !== null && !Array.isArray(answer))
        return answer as Record<string, unknown>
    } catch {
      // refused below
    }
    throw new AuthFailure('unavailable', 'introspection answer unreadable', 1)
  }

  /** RFC 7662 §2.1: the token and a hint, the gateway authenticated as a client (§2.1). */
  #request(token: string) {
    const form = new URLSearchParams({ token, token_type_hint: 'access_token' })
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    }
    const { clientId, clientSecret } = this.#cfg
    if (this.#cfg.clientAuth === 'post') {
      form.set('client_id', clientId)
      form.set('client_secret', clientSecret)
    } else {
      const pair = `${formEncode(clientId)}:${formEncode(clientSecret)}`
      headers['authorization'] = `Basic ${Buffer.from(pair).toString('base64')}`
    }
    // SECURITY: bounded, and a redirect is a failure: it would carry the token and the secret.
    return {
      method: 'POST' as const,
      headers,
      body: form.toString(),
      timeoutMs: this.#cfg.timeoutMs,
      maxBytes: MAX_ANSWER_BYTES,
    }
  }

  /** The configured URL, or `introspection_endpoint` of the issuer's metadata (RFC 8414 §2). */
  #endpoint(): Promise<string> {
    this.#url ??= this.#discover()
    return this.#url
  }

  async #discover(): Promise<string> {
    const issuer = this.#cfg.issuer ?? this.#opts.issuers[0]
    if (issuer === undefined) throw new Error('introspection: no issuer to discover from')
    const meta = await fetchIssuerMetadata(issuer, this.#cfg.timeoutMs)
    const found = meta['introspection_endpoint']
    if (typeof found !== 'string' || !URL.canParse(found))
      throw new Error('metadata has no introspection_endpoint')
    return found
  }

  #retryAfter(): number {
    return Math.max(1, Math.ceil(this.#breaker.openMs / 1000))
  }
}

/** A JWT in compact form (RFC 7519 §3): three base64url parts. Anything else is opaque. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/

/**
 * The verifier of a config with `auth.introspection`: a token shaped as a JWT goes to the JWT
 * verifier when `auth.jwt` is configured, every other token (every token, without `auth.jwt`) is
 * introspected (docs/auth.md §Opaque tokens). The same size cap comes first for both.
 */
export function withIntrospection(
  jwt: Verifier | undefined,
  introspector: Introspector,
  maxTokenBytes: number,
): Verifier {
  return {
    verify(token, audience) {
      // SECURITY: size first, before any request is made with it (docs/auth.md).
      if (token.length > maxTokenBytes)
        return Promise.reject(new AuthFailure('invalid_token', 'token too large'))
      if (jwt !== undefined && JWT_SHAPE.test(token)) return jwt.verify(token, audience)
      return introspector.principal(token, audience)
    },
  }
}

function formEncode(s: string): string {
  return new URLSearchParams({ s }).toString().slice(2)
}
