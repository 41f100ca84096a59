import { HOP_BY_HOP } from '../mcp/headers.js'
import type { HeaderMap } from '../mcp/body-transform.js'

// SECURITY: per-user or auth-bearing response headers never cross the gateway: a backend challenge
// would point the client at the backend's authorization server. Alt-Svc would advertise another
// endpoint for the gateway's own origin, sending clients (and their tokens) around it (RFC 7838).
// content-length is re-derived: bodies may be rewritten on the way.
const DROPPED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  'set-cookie',
  'www-authenticate',
  'alt-svc',
  'content-length',
])

/**
 * The upstream response headers that may reach the client (lower-case names, as undici gives them).
 * SECURITY: hop-by-hop headers, and every header the backend nominates in its own `Connection`
 * header, end at this hop (RFC 9110 §7.6.1); relaying them would let a backend pass the client
 * headers it declared meant only for the gateway.
 */
export function relayedHeaders(headers: HeaderMap): HeaderMap {
  const out: HeaderMap = {}
  const connection = headers['connection']
  // Parsed only when present: most backends send no Connection header, or just keep-alive.
  const nominated =
    connection === undefined || connection === 'keep-alive' || connection === 'close'
      ? undefined
      : nominatedBy(connection)
  for (const key in headers) {
    if (DROPPED.has(key) || nominated?.has(key) === true) continue
    out[key] = headers[key]
  }
  return out
}

/** The lower-case header names listed in Connection values (RFC 9110 §7.6.1: comma-separated). */
function nominatedBy(connection: string | string[]): ReadonlySet<string> | undefined {
  const values = typeof connection === 'string' ? [connection] : connection
  let names: Set<string> | undefined
  for (const value of values) {
    for (const token of value.split(',')) {
      const name = token.trim().toLowerCase()
      if (name.length === 0 || name === 'keep-alive' || name === 'close') continue
      ;(names ??= new Set()).add(name)
    }
  }
  return names
}
