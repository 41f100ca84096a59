import { createPublicKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import { createLocalJWKSet, type CryptoKey, type JWTVerifyGetKey } from 'jose'
import type { JwtConfig } from '../config/schema.js'
import type { Clock } from './clock.js'
import { discoveredLocation, fixedLocation, type JwksLocation } from './discovery.js'
import { RemoteJwks } from './remote-jwks.js'

export { JwksUnavailable } from './remote-jwks.js'

/** Where verification keys come from: a resolver over a JWK Set, or one public key. */
export interface KeySource {
  readonly key: JWTVerifyGetKey | KeyObject
  /** True while a key set is loaded and fresh: a failed fetch now is an unknown-`kid` refetch. */
  warm(): boolean
  /** Seconds until the next JWKS fetch attempt is allowed (0 when not backing off). */
  retryAfterSec(): number
  /**
   * The RFC 7638 thumbprint of the key that verified a token, for sources whose keys can change
   * under a running config (a remote set); absent for fixed keys.
   */
  readonly identify?: (key: CryptoKey | KeyObject) => Promise<string>
  /** Whether a remembered verification by the key with this thumbprint may still stand. */
  stillServes(thumbprint: string | undefined): boolean
}

/** Settings outside `auth.jwt`. */
export interface KeySourceOptions {
  /** Clock for the remote set's cache age, cooldown and backoff (tests move it by hand). */
  readonly now?: Clock
}

/**
 * Builds the key source the config names: at most one of jwksUrl, jwksFile, publicKeyFile; with
 * none, the remote set the (single) issuer's metadata names (docs/auth.md, Key fetching).
 */
export function createKeySource(
  jwt: JwtConfig,
  configDir: string,
  opts: KeySourceOptions = {},
): KeySource {
  const location = remoteLocation(jwt)
  if (location !== undefined) return remoteKeySource(location, jwt, opts)
  // Fixed keys change only with a reload, which builds a new verifier and forgets its memo.
  const always = { warm: () => true, retryAfterSec: () => 0, stillServes: () => true }
  if (jwt.jwksFile !== undefined) {
    return { key: readJwks(pathIn(configDir, jwt.jwksFile)), ...always }
  }
  if (jwt.publicKeyFile !== undefined) {
    return { key: readPublicKey(pathIn(configDir, jwt.publicKeyFile)), ...always }
  }
  throw new Error('auth.jwt: set at most one of jwksUrl, jwksFile, publicKeyFile')
}

/** Where the remote set is: `jwksUrl`, or discovered when no key source is configured. */
function remoteLocation(jwt: JwtConfig): JwksLocation | undefined {
  if (jwt.jwksUrl !== undefined) return fixedLocation(new URL(jwt.jwksUrl))
  if (jwt.jwksFile !== undefined || jwt.publicKeyFile !== undefined) return undefined
  if (typeof jwt.issuer !== 'string') throw new Error('auth.jwt: discovery needs a single issuer')
  return discoveredLocation(jwt.issuer, jwt.jwksTimeoutMs)
}

/** True when the keys come from a remote set (configured or discovered), which can change. */
export function isRemote(jwt: JwtConfig): boolean {
  return jwt.jwksFile === undefined && jwt.publicKeyFile === undefined
}

function remoteKeySource(
  location: JwksLocation,
  jwt: JwtConfig,
  opts: KeySourceOptions,
): KeySource {
  const remote = new RemoteJwks(location, {
    timeoutMs: jwt.jwksTimeoutMs,
    cooldownMs: jwt.jwksCooldownMs,
    cacheMaxAgeMs: jwt.jwksCacheMaxAgeMs,
    ...(opts.now !== undefined && { now: opts.now }),
  })
  return {
    key: remote.resolve,
    warm: () => remote.fresh(),
    retryAfterSec: () => remote.retryAfterSec(),
    identify: (key) => remote.identify(key),
    // SECURITY: bound to the exact key, not the kid: a rotation that reuses a kid must end the
    // remembered checks of tokens signed by the withdrawn key (RFC 7638 §1).
    stillServes: (thumbprint) => remote.serves(thumbprint),
  }
}

/** Problems with configured key files, for the config loader (fail at startup, not per request). */
export function checkKeyFiles(jwt: JwtConfig, configDir: string): string[] {
  try {
    if (jwt.jwksFile !== undefined) readJwks(pathIn(configDir, jwt.jwksFile))
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

/** jose's resolver over a JWK Set file; jose judges the shape, the message names the file. */
function readJwks(file: string): ReturnType<typeof createLocalJWKSet> {
  const text = readFileSync(file, 'utf8')
  try {
    return createLocalJWKSet(JSON.parse(text) as Parameters<typeof createLocalJWKSet>[0])
  } catch (err) {
    throw new Error(`${file} is not a JWK Set ({"keys": [...]})`, { cause: err })
  }
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
