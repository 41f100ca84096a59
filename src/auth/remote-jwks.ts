import { createPublicKey, type KeyObject } from 'node:crypto'
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  customFetch,
  errors,
  jwksCache,
  type CryptoKey,
  type ExportedJWKSCache,
  type FetchImplementation,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWK,
  type JWKSCacheInput,
  type JWSHeaderParameters,
  type RemoteJWKSet,
} from 'jose'
import { BoundedFetchFailure, fetchBounded } from './bounded-fetch.js'
import type { Clock } from './clock.js'
import { DiscoveryFailure, type JwksLocation } from './discovery.js'

/** A JWK Set larger than this is refused while it streams in (real sets are a few KiB). */
export const MAX_JWKS_BYTES = 256 * 1024

/** A JWKS fetch that failed: down, timed out, redirected, non-200, too large, or not a JWK Set. */
export class JwksUnavailable extends Error {
  override readonly name = 'JwksUnavailable'
}

/** Timing of the remote set, from `auth.jwt` (docs/auth.md, Key fetching). */
export interface RemoteJwksOptions {
  readonly timeoutMs: number
  readonly cooldownMs: number
  readonly cacheMaxAgeMs: number
  readonly maxBytes?: number
  readonly now?: Clock
}

/** The set jose installed, with the RFC 7638 thumbprints of its keys and its lifetime. */
interface Loaded {
  /** jose's own copy (`jwksCache`), compared by identity to know the two still agree. */
  readonly set: JSONWebKeySet
  readonly thumbprints: ReadonlySet<string>
  /** Clock time until which the set is used without asking again (see `lifetimeMs`). */
  readonly until: number
}

/**
 * The remote JWK Set: jose's createRemoteJWKSet fetches (through the bounded fetch, as its
 * `customFetch`), checks that the answer is a JWK Set, selects keys and keeps the set (in its
 * `jwksCache`). What jose cannot do is done here:
 * - time, on an injectable clock (jose reads `Date.now()`), so its own timers are switched off
 *   and this class says when to call `reload()`;
 * - a lifetime per answer from `Cache-Control: max-age` minus `Age`, within bounds (`lifetimeMs`),
 *   where jose has one fixed `cacheMaxAge`;
 * - an unknown `kid` refetches at once unless a refetch for an unknown `kid` was made within
 *   `cooldownMs`: its own timer (jose counts from any fetch, so a key rotated in just after a
 *   fetch by age would lock its users out for the cooldown);
 * - a token that finds a refetch under way joins it instead of being refused (jose refuses an
 *   unknown `kid` during its cooldown, in flight or not);
 * - a backoff after a failed fetch (1 s, or the cooldown if shorter), so an outage does not turn
 *   every request into a fetch (jose retries on every call);
 * - discovery: the URL may come from the issuer's metadata and is looked up again after a
 *   failure (jose takes one fixed URL); a resolver for a moved URL starts from the set held;
 * - thumbprints of the keys, for remembered token checks (`serves`).
 * One fetch is in flight at a time, whoever asks, so a set is never replaced by an older answer.
 */
export class RemoteJwks {
  readonly #location: JwksLocation
  readonly #opts: Required<RemoteJwksOptions>
  readonly #backoffMs: number
  /** jose's resolver for the current URL. */
  #jose: { readonly href: string; readonly keys: RemoteJWKSet } | undefined
  /** jose's `jwksCache`: it writes the set and the time of each fetch it installs. */
  readonly #cache: Partial<ExportedJWKSCache> = {}
  #loaded: Loaded | undefined
  #pending: Promise<void> | undefined
  #failedUntil = 0
  /** When the last refetch for an unknown `kid` started. */
  #missAt = -Infinity
  /** The lifetime the last answer announced, noted by `#fetchBounded` for `#fetch`. */
  #lifetime = 0
  /** Thumbprints of the keys jose imported, computed once per key object. */
  readonly #ids = new WeakMap<object, Promise<string>>()

  constructor(location: JwksLocation, opts: RemoteJwksOptions) {
    this.#location = location
    this.#opts = { maxBytes: MAX_JWKS_BYTES, now: Date.now, ...opts }
    this.#backoffMs = Math.min(opts.cooldownMs, 1000)
  }

  /** The jose key resolver (a JWTVerifyGetKey). */
  readonly resolve = async (
    header: JWSHeaderParameters,
    token: FlattenedJWSInput,
  ): Promise<CryptoKey> => {
    if (!this.fresh()) await this.#reload()
    const loaded = this.#loaded
    try {
      return await this.#select(header, token)
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err
      // A newer set arrived while this token waited: judge by it, without asking again.
      if (this.#loaded !== loaded) return this.#select(header, token)
      // A refetch under way (for this miss or any other reason) is joined, never refused.
      if (this.#pending === undefined) {
        // SECURITY: one refetch per cooldown for unknown kids, however many a caller invents.
        if (this.#opts.now() < this.#missAt + this.#opts.cooldownMs) throw err
        this.#missAt = this.#opts.now()
      }
      await this.#reload()
      return this.#select(header, token)
    }
  }

  /** True while a set is loaded and within its lifetime (`lifetimeMs`). */
  fresh(): boolean {
    const loaded = this.#loaded
    return loaded !== undefined && this.#opts.now() < loaded.until
  }

  /** Seconds until the next fetch attempt is allowed, at least 1. */
  retryAfterSec(): number {
    return Math.max(1, Math.ceil((this.#failedUntil - this.#opts.now()) / 1000))
  }

  /** True while the fresh current set holds the key with this RFC 7638 thumbprint. */
  serves(thumbprint: string | undefined): boolean {
    const loaded = this.#loaded
    // SECURITY: jose switches its set a few microtasks before the thumbprints here follow;
    // in between, nothing is vouched for (the token is checked again).
    if (thumbprint === undefined || loaded === undefined || loaded.set !== this.#cache.jwks) {
      return false
    }
    return this.fresh() && loaded.thumbprints.has(thumbprint)
  }

  /** The RFC 7638 thumbprint of a key the resolver returned (what signed a verified token). */
  identify(key: CryptoKey | KeyObject): Promise<string> {
    let id = this.#ids.get(key)
    if (id === undefined) {
      id = calculateJwkThumbprint(key)
      this.#ids.set(key, id)
    }
    return id
  }

  /**
   * jose's key selection over the set it holds. Only called once a fetch succeeded, so jose has
   * a set and, with its timers off, never fetches on its own (past the backoff).
   */
  #select(header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<CryptoKey> {
    return this.#jose!.keys(header, token)
  }

  #reload(): Promise<void> {
    // Coalescing across discovery, the backoff and jose's fetch: one request in flight.
    this.#pending ??= this.#fetch().finally(() => (this.#pending = undefined))
    return this.#pending
  }

  async #fetch(): Promise<void> {
    const now = this.#opts.now
    if (now() < this.#failedUntil) throw new JwksUnavailable('JWKS endpoint failing; backing off')
    try {
      const jose = this.#joseFor(await this.#location.url())
      await jose.reload()
      // jose wrote the set it installed into the cache; its thumbprints follow it.
      const set = this.#cache.jwks!
      this.#loaded = { set, thumbprints: await thumbprintsOf(set), until: now() + this.#lifetime }
    } catch (err) {
      this.#failedUntil = now() + this.#backoffMs
      // The set may have moved: discovery runs again on the next fetch (docs/auth.md).
      this.#location.forget()
      const reason =
        err instanceof BoundedFetchFailure || err instanceof DiscoveryFailure
          ? err.message
          : 'not a JWK Set'
      throw new JwksUnavailable(`JWKS fetch failed: ${reason}`, { cause: err })
    }
  }

  /** jose's resolver for `href`; a new URL gets a new one, seeded with the set already held. */
  #joseFor(href: string): RemoteJWKSet {
    if (this.#jose?.href !== href) {
      const keys = createRemoteJWKSet(new URL(href), {
        // Off: jose's timers read Date.now() and know one max age; `resolve` decides instead.
        cacheMaxAge: Infinity,
        cooldownDuration: Infinity,
        timeoutDuration: this.#opts.timeoutMs,
        [customFetch]: this.#fetchBounded,
        [jwksCache]: this.#cache as JWKSCacheInput,
      })
      this.#jose = { href, keys }
    }
    return this.#jose.keys
  }

  /** jose's `customFetch`: the bounded fetch (deadline, no redirects, size cap) in its place. */
  readonly #fetchBounded: FetchImplementation = async (url, init) => {
    const { text, headers } = await fetchBounded(url, {
      method: 'GET',
      // jose names the JWK Set media types; the user agent stays the gateway's.
      headers: { accept: init.headers.get('accept') ?? 'application/json' },
      timeoutMs: this.#opts.timeoutMs,
      maxBytes: this.#opts.maxBytes,
    })
    this.#lifetime = lifetimeMs(headers, this.#opts)
    return new Response(text)
  }
}

/**
 * How long a fetched set is used: the answer's freshness lifetime by `Cache-Control: max-age`
 * minus `Age` (RFC 9111 §4.2.1, §4.2.3), so an identity provider that withdraws a key is heard
 * within the time it announced. Bounded: never longer than `cacheMaxAgeMs`, and never shorter
 * than the cooldown (at least 1 s), so `no-cache`, `no-store` or `max-age=0` cannot make every
 * token a fetch. Without `max-age`, `cacheMaxAgeMs`.
 */
function lifetimeMs(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  opts: Pick<RemoteJwksOptions, 'cooldownMs' | 'cacheMaxAgeMs'>,
): number {
  const floor = Math.min(opts.cacheMaxAgeMs, Math.max(opts.cooldownMs, 1000))
  const said = maxAgeSec(headers['cache-control'])
  if (said === undefined) return opts.cacheMaxAgeMs
  const age = deltaSeconds(single(headers['age'])) ?? 0
  return Math.min(opts.cacheMaxAgeMs, Math.max(floor, (said - age) * 1000))
}

/** `max-age` of a Cache-Control value; `no-cache` / `no-store` count as 0 (RFC 9111 §5.2.2). */
function maxAgeSec(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined
  let maxAge: number | undefined
  for (const part of (Array.isArray(value) ? value.join(',') : value).split(',')) {
    const [rawName = '', rawArg] = part.split('=', 2)
    const name = rawName.trim().toLowerCase()
    if (name === 'no-cache' || name === 'no-store') return 0
    if (name !== 'max-age' || maxAge !== undefined) continue
    // RFC 9111 §1.2.2: delta-seconds; the quoted form is tolerated (§5.2).
    maxAge = deltaSeconds(rawArg?.trim().replace(/^"(.*)"$/, '$1'))
  }
  return maxAge
}

function deltaSeconds(text: string | undefined): number | undefined {
  return text !== undefined && /^\d{1,10}$/.test(text) ? Number(text) : undefined
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/**
 * RFC 7638 thumbprints of every key in the set. Each key goes through Node's importer first, so
 * the thumbprint is of the key's canonical form, the same form jose's imported key exports to
 * (a set that pads `n` with a zero byte still matches the key that verified).
 */
async function thumbprintsOf(set: JSONWebKeySet): Promise<Set<string>> {
  const out = new Set<string>()
  for (const jwk of set.keys) {
    const id = await thumbprintOf(jwk).catch(() => undefined)
    if (id !== undefined) out.add(id)
  }
  return out
}

function thumbprintOf(jwk: JWK): Promise<string> {
  try {
    return calculateJwkThumbprint(createPublicKey({ key: jwk as JsonWebKeyInput, format: 'jwk' }))
  } catch {
    return calculateJwkThumbprint(jwk)
  }
}

type JsonWebKeyInput = Parameters<typeof createPublicKey>[0] extends infer T
  ? T extends { format: 'jwk'; key: infer K }
    ? K
    : never
  : never
