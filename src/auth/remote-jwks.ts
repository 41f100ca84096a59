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
  readonly at: number
}

/**
 * jose's createRemoteJWKSet, re-implemented over a bounded fetch and an injectable clock, with
 * the same semantics: keys are used for `cacheMaxAgeMs`, then refetched before use; an unknown
 * `kid` refetches at most once per `cooldownMs`; concurrent refetches share one request (so
 * fetches never overlap and a set is never replaced by an older answer). Added: after a failed
 * fetch the endpoint is not asked again for 1 s (or the cooldown, if shorter), so an outage does
 * not turn every request into a fetch. Key selection stays jose's (createLocalJWKSet).
 */
export class RemoteJwks {
  readonly #url: string
  readonly #opts: Required<RemoteJwksOptions>
  readonly #backoffMs: number
  #loaded: Loaded | undefined
  #pending: Promise<void> | undefined
  #failedUntil = 0
  /** Thumbprints of the keys jose imported, computed once per key object. */
  readonly #ids = new WeakMap<object, Promise<string>>()

  constructor(url: URL, opts: RemoteJwksOptions) {
    this.#url = url.href
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
      // jose: an unknown kid refetches, unless the set is younger than the cooldown.
      if (!(err instanceof errors.JWKSNoMatchingKey) || this.#within(this.#opts.cooldownMs)) {
        throw err
      }
      return (await this.#reload()).resolve(header, token)
    }
  }

  /** True while a set is loaded and younger than `cacheMaxAgeMs`. */
  fresh(): boolean {
    return this.#within(this.#opts.cacheMaxAgeMs)
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

  #within(ms: number): boolean {
    const loaded = this.#loaded
    return loaded !== undefined && this.#opts.now() < loaded.at + ms
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
    try {
      const text = await fetchBounded(this.#url, {
        method: 'GET',
        headers: { accept: 'application/json, application/jwk-set+json' },
        timeoutMs: this.#opts.timeoutMs,
        maxBytes: this.#opts.maxBytes,
      })
      const json = parseJson(text)
      if (!isJwkSet(json)) throw new JwksUnavailable('JWKS endpoint sent no JWK Set')
      resolve = createLocalJWKSet(json)
      thumbprints = await thumbprintsOf(json)
    } catch (err) {
      this.#failedUntil = now() + this.#backoffMs
      if (err instanceof JwksUnavailable) throw err
      const reason = err instanceof BoundedFetchFailure ? err.message : 'not a JWK Set'
      throw new JwksUnavailable(`JWKS fetch failed: ${reason}`, { cause: err })
    }
    // The set and its thumbprints switch together, so `serves` never judges by a mix.
    this.#loaded = { resolve, thumbprints, at: now() }
  }
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
