/** Verified identity of the caller; absent when auth is not configured. */
export interface Principal {
  readonly subject: string
  readonly issuer: string
  readonly claims: Readonly<Record<string, unknown>>
  readonly scopes: ReadonlySet<string>
  /** Raw bearer token: used only for token exchange, never logged or forwarded. */
  readonly token: string
}
