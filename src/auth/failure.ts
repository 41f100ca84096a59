/**
 * Why a token was refused. `invalid_token` means the caller must get a new token (401);
 * `unavailable` means the gateway could not check it right now (503, Retry-After), so clients
 * do not throw away good tokens and re-authenticate in a storm (docs/auth.md, Key fetching).
 */
export type AuthFailureKind = 'invalid_token' | 'unavailable'

/** A refused or uncheckable token; `reason` is short fixed text, safe to show the caller. */
export class AuthFailure extends Error {
  override readonly name = 'AuthFailure'
  constructor(
    readonly kind: AuthFailureKind,
    readonly reason: string,
    /** Seconds until a retry can succeed (only for `unavailable`). */
    readonly retryAfterSec = 1,
    options?: ErrorOptions,
  ) {
    super(reason, options)
  }
}
