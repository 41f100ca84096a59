import { createHash, randomBytes } from 'node:crypto'

/** How long a sign-in lasts, from the moment it was made (docs/operations.md §Status page). */
export const SESSION_MS = 8 * 3600 * 1000
/** Sessions kept at once; one more sign-in ends the oldest. */
const MAX_SESSIONS = 64

/**
 * The status page's sign-ins, kept here and nowhere else: a session id is 32 random bytes
 * (crypto.randomBytes, base64url), given to the browser as the login cookie and known to the
 * gateway by its SHA-256 only, so neither a copy of this table nor a guess at the token yields one.
 * A session ends SESSION_MS after it began on this clock (absolute, not sliding: what the browser
 * does with Max-Age changes nothing), on sign-out, when admin.token changes, and with the process.
 * The table is bounded: only a correct token opens a session, so only operators fill it.
 */
export class SessionTable {
  /** SHA-256 (hex) of a session id -> when it ends (ms on `now`). Insertion order is age order. */
  private readonly ends = new Map<string, number>()

  constructor(private readonly now: () => number = Date.now) {}

  /** A new session: its id (the cookie value) and how long it lasts, in seconds. */
  open(): { readonly id: string; readonly seconds: number } {
    const now = this.now()
    if (this.ends.size >= MAX_SESSIONS) this.sweep(now)
    if (this.ends.size >= MAX_SESSIONS) {
      const oldest = this.ends.keys().next()
      if (oldest.done !== true) this.ends.delete(oldest.value)
    }
    // SECURITY: random, never derived from the token: a cookie names one sign-in and nothing else.
    const id = randomBytes(32).toString('base64url')
    this.ends.set(digest(id), now + SESSION_MS)
    return { id, seconds: SESSION_MS / 1000 }
  }

  /** Whether `id` names a session that has not ended. */
  valid(id: string): boolean {
    // The lookup is by SHA-256 of what the client sent: its timing says nothing about stored ids.
    const key = digest(id)
    const end = this.ends.get(key)
    if (end === undefined) return false
    // SECURITY: the gateway's clock decides, not the cookie's Max-Age.
    if (this.now() < end) return true
    this.ends.delete(key)
    return false
  }

  /** Ends one session (sign-out); an unknown id ends nothing. */
  end(id: string): void {
    this.ends.delete(digest(id))
  }

  /** Ends every session (admin.token changed). */
  clear(): void {
    this.ends.clear()
  }

  get size(): number {
    return this.ends.size
  }

  private sweep(now: number): void {
    for (const [key, end] of this.ends) if (end <= now) this.ends.delete(key)
  }
}

function digest(id: string): string {
  return createHash('sha256').update(id).digest('hex')
}
