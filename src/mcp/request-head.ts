import { HOP_BY_HOP } from './headers.js'

/** What the gateway needs from the request's header block, read in one pass over rawHeaders. */
export interface RequestHead {
  readonly version: string | undefined
  readonly method: string | undefined
  readonly name: string | undefined
  readonly sessionId: string | undefined
  readonly origin: string | undefined
  readonly host: string | undefined
  readonly authorization: string | undefined
  readonly contentType: string | undefined
  readonly contentLength: number | undefined
  readonly contentEncoding: string | undefined
  /** Lower-case name of a single-valued header that appeared more than once. */
  readonly duplicate: string | undefined
  readonly count: number
  /** Headers safe to send upstream: [name, value, name, value …] in the client's order. */
  readonly forward: string[]
}

// SECURITY: a second copy of any of these could make the gateway and the backend read different
// values (Node keeps the first authorization/host/content-type, other stacks keep the last).
// Each gets a bit, so the per-request duplicate check allocates nothing.
const SINGLE: ReadonlyMap<string, number> = new Map(
  [
    'mcp-protocol-version', 'mcp-method', 'mcp-name', 'mcp-session-id', 'authorization', 'origin',
    'host', 'content-type', 'content-length', 'content-encoding', 'transfer-encoding',
  ].map((name, i) => [name, 1 << i]),
)

// SECURITY: never forwarded: client credentials (the spec forbids token passthrough,
// authorization/index.mdx §Token Handling), identity/forwarding headers the gateway owns
// (reliability S-20), and framing the gateway re-derives.
const NOT_FORWARDED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  'authorization',
  'cookie',
  'host',
  'content-length',
  'accept-encoding',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-real-ip',
  'expect',
])

/** Reads the header block once; undefined fields mean "absent". */
export function readRequestHead(raw: readonly string[]): RequestHead {
  let version, method, name, sessionId, origin, host, authorization, contentType
  let contentLength: number | undefined
  let contentEncoding, duplicate, connection: string | undefined
  let seen = 0
  const forward: string[] = []
  for (let i = 0; i < raw.length; i += 2) {
    const key = (raw[i] as string).toLowerCase()
    const value = raw[i + 1] as string
    const bit = SINGLE.get(key)
    if (bit !== undefined) {
      if ((seen & bit) !== 0) duplicate ??= key
      seen |= bit
    }
    switch (key) {
      case 'mcp-protocol-version': version = value; break
      case 'mcp-method': method = value; break
      case 'mcp-name': name = value; break
      case 'mcp-session-id': sessionId = value; break
      case 'origin': origin = value; break
      case 'host': host = value; break
      case 'authorization': authorization = value; break
      case 'content-type': contentType = value; break
      case 'content-encoding': contentEncoding = value; break
      case 'content-length': contentLength = Number(value); break
      case 'connection': connection = value; break
    }
    if (!NOT_FORWARDED.has(key)) forward.push(raw[i] as string, value)
  }
  const fwd = connection === undefined ? forward : dropNominated(forward, connection)
  return {
    version, method, name, sessionId, origin, host, authorization, contentType, contentLength,
    contentEncoding, duplicate, count: raw.length / 2, forward: fwd,
  }
}

/** RFC 9110 §7.6.1: headers named in Connection are hop-by-hop too. */
function dropNominated(forward: string[], connection: string): string[] {
  const nominated = new Set(
    connection.split(',').map((t) => t.trim().toLowerCase()).filter((t) => t.length > 0),
  )
  nominated.delete('close')
  nominated.delete('keep-alive')
  if (nominated.size === 0) return forward
  const out: string[] = []
  for (let i = 0; i < forward.length; i += 2) {
    if (!nominated.has((forward[i] as string).toLowerCase())) out.push(forward[i] as string, forward[i + 1] as string)
  }
  return out
}

/** True for `application/json` with optional parameters (RFC 9110 media types are case-insensitive). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false
  const semi = contentType.indexOf(';')
  const type = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase()
  return type === 'application/json'
}
