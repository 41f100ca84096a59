import { createHash, timingSafeEqual } from 'node:crypto'
import { SessionTable } from './sessions.js'
import { FailureThrottle } from './throttle.js'

/** What a request to the admin listener presents: a bearer token, a session cookie, or neither. */
export interface Presented {
  /** The token of `Authorization: Bearer <token>` (RFC 6750 §2.1). */
  readonly bearer?: string | undefined
  /** The login cookie's value. */
  readonly session?: string | undefined
}

/** Whether a request may read the status, and if not, why. */
export type Verdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly why: 'missing' | 'wrong' }
  | { readonly ok: false; readonly why: 'throttled'; readonly retryAfter: number }

/** A sign-in through the page's form. */
export type SignIn =
  | { readonly ok: true; readonly session: string; readonly seconds: number }
  | { readonly ok: false; readonly why: 'no-token' | 'wrong' }
  | { readonly ok: false; readonly why: 'throttled'; readonly retryAfter: number }

const OK = { ok: true } as const

/**
 * `admin.token` (docs/operations.md §Status page): when set, the page, status.json, its event
 * stream and /readyz (admin) need it, as `Authorization: Bearer <token>` (scripts) or a session
 * cookie from the page's sign-in form (browsers; sessions.ts). Every presented token, in any of
 * these ways, is a try: a wrong one counts against its source (throttle.ts), and a source past its
 * budget is refused before its token is read, the right one included. A valid session is honoured
 * even then: its id is 256 random bits, so reading it gives a guesser nothing. Tokens are compared
 * as SHA-256 digests with timingSafeEqual, so neither their length nor content leaks in timing.
 */
export class AdminAuth {
  private digest: Buffer | undefined
  private readonly sessions: SessionTable
  private readonly throttle: FailureThrottle

  constructor(token: string | undefined, now: () => number = Date.now) {
    this.digest = token === undefined ? undefined : sha256(token)
    this.sessions = new SessionTable(now)
    this.throttle = new FailureThrottle(now)
  }

  get required(): boolean {
    return this.digest !== undefined
  }

  /**
   * The token of a reloaded config. SECURITY: a different token ends every session (a sign-in
   * made with the old token must not outlive it); the same token keeps them.
   */
  setToken(token: string | undefined): void {
    const next = token === undefined ? undefined : sha256(token)
    const same =
      next === undefined || this.digest === undefined
        ? next === this.digest
        : timingSafeEqual(next, this.digest)
    if (same) return
    this.digest = next
    this.sessions.clear()
  }

  /** Whether a request from `peer` (its TCP peer address) may read the status. */
  check(peer: string | undefined, presented: Presented): Verdict {
    const digest = this.digest
    if (digest === undefined) return OK
    const { bearer, session } = presented
    if (bearer === undefined && session !== undefined && this.sessions.valid(session)) return OK
    // Nothing presented is not a guess: the login form, not a count.
    if (bearer === undefined && session === undefined) return { ok: false, why: 'missing' }
    // SECURITY: a source past its budget is refused before its token is compared.
    const retryAfter = this.throttle.wait(peer)
    if (retryAfter > 0) return { ok: false, why: 'throttled', retryAfter }
    if (bearer !== undefined && timingSafeEqual(sha256(bearer), digest)) return OK
    // SECURITY: every wrong token counts, bearer and cookie as well as the form.
    this.throttle.fail(peer)
    return { ok: false, why: 'wrong' }
  }

  /** A sign-in from `peer` with the form's `candidate`: a new session when it is the token. */
  signIn(peer: string | undefined, candidate: string): SignIn {
    const digest = this.digest
    if (digest === undefined) return { ok: false, why: 'no-token' }
    const retryAfter = this.throttle.wait(peer)
    if (retryAfter > 0) return { ok: false, why: 'throttled', retryAfter }
    if (!timingSafeEqual(sha256(candidate), digest)) {
      this.throttle.fail(peer)
      return { ok: false, why: 'wrong' }
    }
    const { id, seconds } = this.sessions.open()
    return { ok: true, session: id, seconds }
  }

  /** Sign-out: ends the session the cookie names, if any. */
  signOut(session: string | undefined): void {
    if (session !== undefined) this.sessions.end(session)
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}
