import { createPublicKey, type KeyObject } from 'node:crypto'
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  errors,
  type CryptoKey,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWK,
  type JWSHeaderParameters,
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

/** One fetched set: jose's resolver over it and the RFC 7638 thumbprints of its keys. */
interface Loaded {
  readonly resolve: ReturnType<typeof createLocalJWKSet>
  readonly thumbprints: ReadonlySet<string>
  /** Clock time until which the set is used without asking again (see `lifetimeMs`). */
  readonly until: number
}

/**
 * jose's createRemoteJWKSet, re-implemented over a bounded fetch and an injectable clock. Keys
 * are used for as long as the endpoint's `Cache-Control` says, within bounds (`lifetimeMs`), then
 * refetched before use. A token whose `kid` the set lacks refetches at once, unless a refetch
 * for an unknown `kid` was made within `cooldownMs` (its own timer: a set fetched at start or by
 * age does not delay it, so a key the authorization server just rotated in is found on its first
 * token). Concurrent refetches share one request, so fetches never overlap and a set is never
 * replaced by an older answer. After a failed fetch the endpoint is not asked again for 1 s (or
 * the cooldown, if shorter), so an outage does not turn every request into a fetch. Key selection
 * stays jose's (createLocalJWKSet).
 */
export class RemoteJwks {
  readonly #location: JwksLocation
  readonly #opts: Required<RemoteJwksOptions>
  readonly #backoffMs: number
  #loaded: Loaded | undefined
  #pending: Promise<void> | undefined
  #failedUntil = 0
  /** When the last refetch for an unknown `kid` started. */
  #missAt = -Infinity
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
    let loaded = this.#loaded
    if (loaded === undefined || !this.fresh()) loaded = await this.#reload()
    try {
      return await loaded.resolve(header, token)
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err
      // A newer set arrived while this token waited: judge by it, without asking again.
      const newer = this.#loaded
      if (newer !== undefined && newer !== loaded) return newer.resolve(header, token)
      // A refetch under way (for this miss or any other reason) is joined, never refused.
      if (this.#pending === undefined) {
        // SECURITY: one refetch per cooldown for unknown kids, however many a caller invents.
        if (this.#opts.now() < this.#missAt + this.#opts.cooldownMs) throw err
        this.#missAt = this.#opts.now()
      }
      return (await this.#reload()).resolve(header, token)
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
    return thumbprint !== undefined && this.fresh() && this.#loaded!.thumbprints.has(thumbprint)
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

  async #reload(): Promise<Loaded> {
    // Coalescing: one request in flight, whoever asks.
    this.#pending ??= this.#fetch().finally(() => (this.#pending = undefined))
    await this.#pending
    // #fetch installed a set or threw.
    return this.#loaded!
  }

  async #fetch(): Promise<void> {
    const now = this.#opts.now
    if (now() < this.#failedUntil) throw new JwksUnavailable('JWKS endpoint failing; backing off')
    let resolve: Loaded['resolve']
    let thumbprints: Loaded['thumbprints']
    let lifetime: number
    try {
      const url = await this.#location.url()
      const { text, headers } = await fetchBounded(url, {
        method: 'GET',
        headers: { accept: 'application/json, application/jwk-set+json' },
        timeoutMs: this.#opts.timeoutMs,
        maxBytes: this.#opts.maxBytes,
      })
      const json = parseJson(text)
      if (!isJwkSet(json)) throw new JwksUnavailable('JWKS endpoint sent no JWK Set')
      resolve = createLocalJWKSet(json)
      thumbprints = await thumbprintsOf(json)
      lifetime = lifetimeMs(headers, this.#opts)
    } catch (err) {
      this.#failedUntil = now() + this.#backoffMs
      this.#location.forget()
      if (err instanceof JwksUnavailable) throw err
      const reason =
        err instanceof BoundedFetchFailure || err instanceof DiscoveryFailure
          ? err.message
          : 'not a JWK Set'
      throw new JwksUnavailable(`JWKS fetch failed: ${reason}`, { cause: err })
    }
    // The set and its thumbprints switch together, so `serves` never judges by a mix.
    this.#loaded = { resolve, thumbprints, until: now() + lifetime }
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

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

/** The same shape test as jose's own (lib/validate.ts isJwkSet). */
export function isJwkSet(v: unknown): v is JSONWebKeySet {
  if (typeof v !== 'object' || v === null || !('keys' in v) || !Array.isArray(v.keys)) return false
  return v.keys.every((k: unknown) => typeof k === 'object' && k !== null && !Array.isArray(k))
}
