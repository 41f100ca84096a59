import { createPublicKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  type FetchImplementation,
  type JSONWebKeySet,
  type JWTVerifyGetKey,
} from 'jose'
import type { AuthConfig } from '../config/schema.js'

type JwtConfig = AuthConfig['jwt']

/** Where verification keys come from: a resolver over a JWK Set, or one public key. */
export interface KeySource {
  readonly key: JWTVerifyGetKey | KeyObject
  /** True while a key set is loaded and fresh: a failed fetch now is an unknown-`kid` refetch. */
  warm(): boolean
  /** Seconds until the next JWKS fetch attempt is allowed (0 when not backing off). */
  retryAfterSec(): number
  /** Whether a remembered verification by key `kid` may still stand (the key is still served). */
  stillServes(kid: string | undefined): boolean
}

/** A JWKS fetch that failed: down, timed out, redirected, non-200, or not a JWK Set. */
export class JwksUnavailable extends Error {
  override readonly name = 'JwksUnavailable'
}

/** Builds the key source the config names (exactly one of jwksUrl, jwksFile, publicKeyFile). */
export function createKeySource(jwt: JwtConfig, configDir: string): KeySource {
  if (jwt.jwksUrl !== undefined) return remoteKeySource(new URL(jwt.jwksUrl), jwt)
  const always = { warm: () => true, retryAfterSec: () => 0, stillServes: () => true }
  if (jwt.jwksFile !== undefined) {
    return { key: createLocalJWKSet(readJwks(pathIn(configDir, jwt.jwksFile))), ...always }
  }
  if (jwt.publicKeyFile !== undefined) {
    return { key: readPublicKey(pathIn(configDir, jwt.publicKeyFile)), ...always }
  }
  throw new Error('auth.jwt: set exactly one of jwksUrl, jwksFile, publicKeyFile')
}

/**
 * jose's remote set caches keys for `cacheMaxAge`, refetches on an unknown `kid` at most once per
 * `cooldownDuration` and shares one in-flight fetch between concurrent callers. What it does not do
 * is hold back after a failed fetch, so while the endpoint is down every request would hit it
 * again; the fetch below refuses for a short while after a failure (1 s, or the cooldown if less).
 */
function remoteKeySource(url: URL, jwt: JwtConfig): KeySource {
  const backoffMs = Math.min(jwt.jwksCooldownMs, 1000)
  let failedUntil = 0
  const fetchJwks: FetchImplementation = async (href, init) => {
    if (Date.now() < failedUntil) throw new JwksUnavailable('JWKS endpoint failing; backing off')
    try {
      // jose passes redirect: 'manual' and its timeout signal; a 3xx is a failure (B-20 e).
      const res = await fetch(href, init)
      if (res.status !== 200) throw new JwksUnavailable(`JWKS endpoint answered ${res.status}`)
      const text = await res.text()
      if (!isJwkSet(parseJson(text))) throw new JwksUnavailable('JWKS endpoint sent no JWK Set')
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } })
    } catch (err) {
      failedUntil = Date.now() + backoffMs
      if (err instanceof JwksUnavailable) throw err
      throw new JwksUnavailable('JWKS fetch failed', { cause: err })
    }
  }
  const remote = createRemoteJWKSet(url, {
    timeoutDuration: jwt.jwksTimeoutMs,
    cooldownDuration: jwt.jwksCooldownMs,
    cacheMaxAge: jwt.jwksCacheMaxAgeMs,
    [customFetch]: fetchJwks,
  })
  return {
    key: remote,
    warm: () => remote.fresh,
    retryAfterSec: () => Math.max(1, Math.ceil((failedUntil - Date.now()) / 1000)),
    // A key that rotated out of the set (seen on the next fetch) ends its tokens' cached checks.
    stillServes: (kid) => remote.fresh && (remote.jwks()?.keys.some((k) => k.kid === kid) ?? false),
  }
}

/** Problems with configured key files, for the config loader (fail at startup, not per request). */
export function checkKeyFiles(jwt: JwtConfig, configDir: string): string[] {
  try {
    if (jwt.jwksFile !== undefined) createLocalJWKSet(readJwks(pathIn(configDir, jwt.jwksFile)))
  } catch (err) {
    return [`auth.jwt.jwksFile: ${(err as Error).message}`]
  }
  try {
    if (jwt.publicKeyFile !== undefined) readPublicKey(pathIn(configDir, jwt.publicKeyFile))
  } catch (err) {
    return [`auth.jwt.publicKeyFile: ${(err as Error).message}`]
  }
  return []
}

function readJwks(file: string): JSONWebKeySet {
  const json = parseJson(readFileSync(file, 'utf8'))
  if (!isJwkSet(json)) throw new Error(`${file} is not a JWK Set ({"keys": [...]})`)
  return json
}

function readPublicKey(file: string): KeyObject {
  const pem = readFileSync(file, 'utf8')
  // SECURITY: a private key here means a signing secret sits in the gateway's config.
  if (pem.includes('PRIVATE KEY')) throw new Error(`${file} holds a private key, not a public one`)
  return createPublicKey(pem)
}

function pathIn(dir: string, p: string): string {
  return isAbsolute(p) ? p : resolve(dir, p)
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

/** The same shape test as jose's own (lib/validate.ts isJwkSet). */
function isJwkSet(v: unknown): v is JSONWebKeySet {
  if (typeof v !== 'object' || v === null || !('keys' in v) || !Array.isArray(v.keys)) return false
  return v.keys.every((k: unknown) => typeof k === 'object' && k !== null && !Array.isArray(k))
}
