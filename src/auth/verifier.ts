import { errors, jwtVerify, type JWTPayload, type JWTVerifyOptions } from 'jose'
import { LRUCache } from 'lru-cache'
import type { AuthConfig } from '../config/schema.js'
import type { Principal } from './principal.js'
import type { Clock } from './clock.js'
import { AuthFailure } from './failure.js'
import { createKeySource, JwksUnavailable, type KeySource } from './key-source.js'

/**
 * Checks a bearer token for one audience; resolves to the caller or rejects with AuthFailure. A
 * token checked a moment ago is answered synchronously, the caller itself rather than a promise of
 * it: a client sends the same token on every request, and a promise and its await would be most
 * of what such a request costs here.
 */
export interface Verifier {
  verify(token: string, audience: string | readonly string[]): Principal | Promise<Principal>
}

/** A successful check, with the exact key that made it and when it stops counting. */
interface Remembered {
  readonly principal: Principal
  /** RFC 7638 thumbprint of the verifying key (undefined for a fixed key source). */
  readonly thumbprint: string | undefined
  /** Clock time after which the token is checked again (verifiedCacheMs, never past exp). */
  readonly until: number
}

/** Options that live outside `auth:` (limits) or exist for tests. */
export interface VerifierOptions {
  readonly maxTokenBytes: number
  /** Inject a key source (tests); default: the one `auth.jwt` names. */
  readonly keys?: KeySource
  /** Clock for `exp`/`nbf` and the memo's lifetime; also the default key source's clock. */
  readonly now?: Clock
}

/**
 * Compiles `auth.jwt` once. Every check is pinned (spec 2026-07-28 basic/authorization: OAuth 2.1
 * §5.2 and RFC 8707 §2): the signature by a configured key, the algorithm from the configured
 * asymmetric list, `iss`, `aud`, and `exp`, which jose only checks when present unless required.
 */
export function createVerifier(
  auth: AuthConfig,
  configDir: string,
  opts: VerifierOptions,
): Verifier {
  const jwt = auth.jwt
  // Without auth.jwt every token is introspected (auth/introspection.ts); compile.ts knows.
  if (jwt === undefined) throw new Error('auth.jwt is not configured')
  const now = opts.now ?? Date.now
  const keys = opts.keys ?? createKeySource(jwt, configDir, { now })
  const base = {
    // SECURITY: asymmetric only (schema enum): no alg:none, no HS256 keyed with the public key.
    algorithms: [...jwt.algorithms],
    // SECURITY: jose requires `iss` to be present and one of these.
    issuer: typeof jwt.issuer === 'string' ? jwt.issuer : [...jwt.issuer],
    // SECURITY: a token without `exp` would never expire (RFC 9068 §2.2 requires it).
    requiredClaims: ['exp'],
    clockTolerance: jwt.clockToleranceSec,
  } as const satisfies JWTVerifyOptions
  // A signature check costs 50-300 µs of CPU; a client sends the same token on every request.
  // Successful checks are remembered per (audience, token) for at most verifiedCacheMs, never
  // past the token's own exp, and only while the exact key that verified it (by thumbprint, not
  // by kid) is still in the current key set (docs/auth.md, Key fetching).
  const verified =
    jwt.verifiedCacheMs === 0
      ? undefined
      : new LRUCache<string, Remembered>({ max: jwt.verifiedCacheSize })
  const cacheMs = jwt.verifiedCacheMs
  /** The remembered check of `token` for `audience`, while it still counts. */
  const remembered = (cacheKey: string): Principal | undefined => {
    const hit = verified?.get(cacheKey)
    if (hit === undefined) return undefined
    // SECURITY: the signing key must still be served; a same-kid rotation does not count.
    if (now() < hit.until && keys.stillServes(hit.thumbprint)) return hit.principal
    verified?.delete(cacheKey)
    return undefined
  }
  async function check(token: string, audience: string | readonly string[], cacheKey: string) {
    const warm = keys.warm()
    // SECURITY: RFC 8707 audience binding: only tokens issued for this resource.
    const options = {
      ...base,
      audience: typeof audience === 'string' ? audience : [...audience],
      currentDate: new Date(now()),
    }
    let result: Awaited<ReturnType<typeof jwtVerify>>
    try {
      const key = keys.key
      result =
        typeof key === 'function'
          ? await jwtVerify(token, key, options)
          : await jwtVerify(token, key, options)
    } catch (err) {
      throw classifyFailure(err, warm, keys)
    }
    const payload = result.payload
    const principal = toPrincipal(payload, token)
    if (verified === undefined) return principal
    const checkedAt = now()
    const until = Math.min((payload.exp ?? 0) * 1000, checkedAt + cacheMs)
    if (until <= checkedAt) return principal
    // Only a remote set resolves keys (a function key): the verifying key is then in `result`.
    const signer = 'key' in result ? result.key : undefined
    let thumbprint: string | undefined
    if (keys.identify !== undefined) {
      if (signer === undefined || signer instanceof Uint8Array) return principal
      thumbprint = await keys.identify(signer)
    }
    verified.set(cacheKey, { principal, thumbprint, until })
    return principal
  }
  return {
    verify(token, audience) {
      // SECURITY: size first, before any base64 or JSON decoding (docs/auth.md).
      if (token.length > opts.maxTokenBytes) {
        return Promise.reject(new AuthFailure('invalid_token', 'token too large'))
      }
      const cacheKey = verified === undefined ? '' : `${String(audience)}\n${token}`
      return remembered(cacheKey) ?? check(token, audience, cacheKey)
    },
  }
}

/**
 * A key set that could not be fetched is the gateway's problem (503), unless keys were loaded and
 * fresh: then the failure came from refetching for an unknown `kid`, and that token is refused
 * (docs/auth.md, Key fetching). Everything else jose throws is about the token itself.
 */
function classifyFailure(err: unknown, warm: boolean, keys: KeySource): AuthFailure {
  const fetchFailed =
    err instanceof JwksUnavailable ||
    err instanceof errors.JWKSTimeout ||
    err instanceof errors.JWKSInvalid
  if (fetchFailed) {
    if (warm) return new AuthFailure('invalid_token', 'unknown signing key', 1, { cause: err })
    const retry = keys.retryAfterSec()
    return new AuthFailure('unavailable', 'signing keys unavailable', retry, { cause: err })
  }
  return new AuthFailure('invalid_token', reasonOf(err), 1, { cause: err })
}

/** Fixed, short reasons: never jose's message (it may quote claim values). */
function reasonOf(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'token expired'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf' || err.claim === 'iat') return 'token not yet valid'
    if (err.claim === 'exp') return 'missing or invalid exp'
    if (err.claim === 'iss' || err.claim === 'aud') return `wrong ${err.claim}`
    return `invalid ${err.claim} claim`
  }
  if (err instanceof errors.JWKSNoMatchingKey) return 'unknown signing key'
  if (err instanceof errors.JOSEAlgNotAllowed) return 'algorithm not allowed'
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'bad signature'
  return 'malformed token'
}

/** The verified caller. Scopes come from `scope` (RFC 8693 §4.2, space-separated) or `scp`. */
function toPrincipal(payload: JWTPayload, token: string): Principal {
  return {
    subject: typeof payload.sub === 'string' ? payload.sub : '',
    issuer: payload.iss ?? '',
    claims: payload,
    scopes: scopesOf(payload),
    token,
  }
}

/** `scope: "a b"`, or `scp` as an array (Okta) or a space-separated string (Entra ID). */
export function scopesOf(payload: JWTPayload): ReadonlySet<string> {
  const out = new Set<string>()
  const add = (v: unknown): void => {
    const list: unknown[] = typeof v === 'string' ? v.split(' ') : Array.isArray(v) ? v : []
    for (const s of list) if (typeof s === 'string' && s !== '') out.add(s)
  }
  add(payload['scope'])
  add(payload['scp'])
  return out
}
