/** What the `Authorization` header carried, as far as a bearer-token resource server cares. */
export type BearerCredential =
  | { readonly kind: 'none' }
  | { readonly kind: 'malformed'; readonly reason: string }
  | { readonly kind: 'token'; readonly token: string }

// RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; the auth-scheme is case-insensitive
// (RFC 9110 §11.1). Exactly one token: `Bearer a b` is malformed, not "a".
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i
const SCHEME = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?: |$)/

/**
 * Reads a bearer token from the one `Authorization` header (duplicates are refused earlier, at
 * the front door). Size is checked on the raw header, before any parsing or decoding
 * (jose has no size cap; docs/auth.md, `limits.maxTokenBytes`).
 */
export function readBearer(header: string | undefined, maxTokenBytes: number): BearerCredential {
  if (header === undefined) return { kind: 'none' }
  const scheme = SCHEME.exec(header)?.[1]
  // Another scheme (Basic, DPoP …) is no bearer credential at all: challenge without an error.
  if (scheme === undefined || scheme.toLowerCase() !== 'bearer') return { kind: 'none' }
  // SECURITY: cap before the regex and long before base64/JSON decoding.
  if (header.length > maxTokenBytes + 'bearer '.length + 16) {
    return { kind: 'malformed', reason: 'token too large' }
  }
  const token = BEARER.exec(header)?.[1]
  if (token === undefined) return { kind: 'malformed', reason: 'malformed Authorization header' }
  if (token.length > maxTokenBytes) return { kind: 'malformed', reason: 'token too large' }
  return { kind: 'token', token }
}

/** True when the URL carries an access token in its query (RFC 6750 §2.3), which MCP forbids. */
export function hasQueryToken(rawUrl: string | undefined): boolean {
  if (rawUrl === undefined) return false
  const q = rawUrl.indexOf('?')
  if (q === -1) return false
  // Any spelling the backend or a framework might decode to access_token counts.
  return new URLSearchParams(rawUrl.slice(q + 1)).has('access_token')
}
