import { HOP_BY_HOP } from '../mcp/headers.js'
import type { HeaderMap } from './forward.js'

// SECURITY: per-user or auth-bearing response headers never cross the gateway (reliability S-24,
// B-17): a backend challenge would point the client at the backend's authorization server.
// content-length is re-derived: bodies may be rewritten on the way.
const DROPPED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  'set-cookie',
  'www-authenticate',
  'content-length',
])

/** The upstream response headers that may reach the client (lower-case names, as undici gives them). */
export function relayedHeaders(headers: HeaderMap): HeaderMap {
  const out: HeaderMap = {}
  for (const key in headers) if (!DROPPED.has(key)) out[key] = headers[key]
  return out
}
