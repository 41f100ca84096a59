import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'

/** The login cookie: an HMAC of the token (never the token), HttpOnly, SameSite=Strict. */
const SESSION_COOKIE = 'mcp_edge_admin'
/** How long a browser keeps the login. */
const SESSION_SECONDS = 8 * 3600
/** Failed logins allowed per minute, over all clients: guessing stays slow, memory stays flat. */
const MAX_FAILURES = 20
const FAILURE_WINDOW_MS = 60_000

/**
 * `admin.token` (docs/operations.md §Status page): when set, the page, status.json, its event
 * stream and /readyz (admin) need it, as `Authorization: Bearer <token>` (scripts) or the login
 * cookie (browsers, from the form the page shows). Every comparison is of SHA-256 digests with
 * timingSafeEqual, so neither the token's length nor its content leaks through timing.
 */
export class AdminAuth {
  private readonly digest: Buffer | undefined
  private readonly session: string | undefined
  private failures: number[] = []

  constructor(
    token: string | undefined,
    private readonly now: () => number = Date.now,
  ) {
    if (token === undefined) return
    this.digest = sha256(token)
    this.session = createHmac('sha256', token)
      .update('mcp-edge admin session 1')
      .digest('base64url')
  }

  get required(): boolean {
    return this.digest !== undefined
  }

  /** Whether a request may read the status (always, without a token configured). */
  allows(headers: IncomingHttpHeaders): boolean {
    if (this.digest === undefined || this.session === undefined) return true
    const auth = headers.authorization
    if (auth !== undefined && /^bearer /i.test(auth))
      return same(sha256(auth.slice(7).trim()), this.digest)
    const cookie = cookieValue(headers.cookie, SESSION_COOKIE)
    return cookie !== undefined && same(sha256(cookie), sha256(this.session))
  }

  /** A login attempt: the Set-Cookie value on success; `throttled` past MAX_FAILURES a minute. */
  login(candidate: string): { readonly cookie: string } | { readonly throttled: boolean } {
    if (this.digest === undefined || this.session === undefined) return { throttled: false }
    const now = this.now()
    this.failures = this.failures.filter((t) => now - t < FAILURE_WINDOW_MS)
    if (this.failures.length >= MAX_FAILURES) return { throttled: true }
    if (same(sha256(candidate), this.digest)) {
      return {
        cookie: `${SESSION_COOKIE}=${this.session}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_SECONDS}`,
      }
    }
    this.failures.push(now)
    return { throttled: false }
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}

function same(a: Buffer, b: Buffer): boolean {
  return timingSafeEqual(a, b)
}

/** One cookie's value from a Cookie header (RFC 6265 §5.4: `name=value` pairs split by `;`). */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}
