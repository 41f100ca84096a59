import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { ServerConfig } from '../config/schema.js'
import { BoundedFetchFailure, fetchBounded } from './bounded-fetch.js'

type TokenExchangeConfig = NonNullable<ServerConfig['tokenExchange']>

/** Trades a caller's access token for one meant for a single backend (RFC 8693). */
export interface TokenExchanger {
  /** Resolves to the backend's access token; rejects with TokenExchangeFailure. */
  exchange(subjectToken: string): Promise<string>
}

/** The token endpoint could not be reached, refused, or answered something unusable. */
export class TokenExchangeFailure extends Error {
  override readonly name = 'TokenExchangeFailure'
}

/** Options outside the config block; tests use them. */
export interface TokenExchangeOptions {
  /** Most cached exchanged tokens kept (least recently used go first). */
  readonly maxEntries?: number
}

const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange'
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token'
/** A token answer is a few hundred bytes; anything past this is refused while it streams in. */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024
// RFC 6750 §2.1 b64token: what may follow "Bearer " in a header we build.
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/

/**
 * One exchanger per backend. Results are cached per caller token (by hash: the raw token is never a
 * key) until shortly before they expire, and concurrent exchanges for one token share one request.
 */
export function createTokenExchanger(
  cfg: TokenExchangeConfig,
  opts: TokenExchangeOptions = {},
): TokenExchanger {
  const cache = new LRUCache<string, string>({ max: opts.maxEntries ?? 10_000 })
  const pending = new Map<string, Promise<string>>()
  return {
    exchange(subjectToken) {
      const key = createHash('sha256').update(subjectToken).digest('base64url')
      const cached = cache.get(key)
      if (cached !== undefined) return Promise.resolve(cached)
      const inFlight = pending.get(key)
      if (inFlight !== undefined) return inFlight
      const p = exchangeOnce(cfg, subjectToken)
        .then(({ token, ttlMs }) => {
          if (ttlMs > 0) cache.set(key, token, { ttl: ttlMs })
          return token
        })
        .finally(() => pending.delete(key))
      pending.set(key, p)
      return p
    },
  }
}

async function exchangeOnce(
  cfg: TokenExchangeConfig,
  subjectToken: string,
): Promise<{ token: string; ttlMs: number }> {
  const form = new URLSearchParams({
    grant_type: GRANT,
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN,
    requested_token_type: ACCESS_TOKEN,
  })
  if (cfg.audience !== undefined) form.set('audience', cfg.audience)
  if (cfg.resource !== undefined) form.set('resource', cfg.resource)
  if (cfg.scope !== undefined) form.set('scope', cfg.scope)
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  }
  if (cfg.clientAuth === 'post') {
    form.set('client_id', cfg.clientId)
    form.set('client_secret', cfg.clientSecret)
  } else {
    // RFC 6749 §2.3.1: each part form-urlencoded before Basic encoding.
    const pair = `${formEncode(cfg.clientId)}:${formEncode(cfg.clientSecret)}`
    headers['authorization'] = `Basic ${Buffer.from(pair).toString('base64')}`
  }
  let text: string
  try {
    // SECURITY: bounded in time and size, and a redirect is a failure: following one would send
    // the caller's token and the client secret to wherever the Location points.
    ;({ text } = await fetchBounded(cfg.tokenUrl, {
      method: 'POST',
      headers,
      body: form.toString(),
      timeoutMs: cfg.timeoutMs,
      maxBytes: MAX_TOKEN_RESPONSE_BYTES,
    }))
  } catch (err) {
    const why = err instanceof BoundedFetchFailure ? err.message : 'failed'
    throw new TokenExchangeFailure(`token endpoint ${why}`, { cause: err })
  }
  return parseTokenResponse(text, subjectToken)
}

/** RFC 8693 §2.2.1 success response → the token and how long it may be reused. */
function parseTokenResponse(text: string, subjectToken: string): { token: string; ttlMs: number } {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new TokenExchangeFailure('token endpoint sent no JSON')
  }
  if (typeof body !== 'object' || body === null) throw new TokenExchangeFailure('no JSON object')
  const fields = body as Record<string, unknown>
  const { access_token: token, token_type: type, expires_in: expiresIn } = fields
  // SECURITY: the value goes into a header we build; nothing but a b64token may get there.
  if (typeof token !== 'string' || !B64TOKEN.test(token)) {
    throw new TokenExchangeFailure('no usable access_token')
  }
  if (typeof type !== 'string' || type.toLowerCase() !== 'bearer') {
    throw new TokenExchangeFailure('token_type is not Bearer')
  }
  // SECURITY: an endpoint that echoes the subject token would turn this into token passthrough.
  if (token === subjectToken) throw new TokenExchangeFailure('the caller token came back')
  const lifetimeMs = typeof expiresIn === 'number' && expiresIn > 0 ? expiresIn * 1000 : 0
  // Reuse until shortly before expiry: a tenth of the lifetime, at most 30 s, early.
  return { token, ttlMs: Math.floor(lifetimeMs - Math.min(30_000, lifetimeMs / 10)) }
}

function formEncode(s: string): string {
  return new URLSearchParams({ s }).toString().slice(2)
}
