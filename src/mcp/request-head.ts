import {
  DEFAULT_HEADER_RULES,
  isForwardedFamily,
  isOwnedName,
  isUnderscoreTwin,
  type HeaderRules,
} from './owned-headers.js'

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
  /** Lower-case name of a header the gateway reads, owns or sets that `Connection` names. */
  readonly nominatesOwned: string | undefined
  readonly count: number
  /**
   * Headers safe to send upstream: [name, value, name, value …] in the client's order, without
   * hop-by-hop and Connection-named headers, credentials, identity headers and every name the
   * gateway sets for this server.
   */
  readonly forward: string[]
}

// SECURITY: a second copy of any of these could make the gateway and the backend read different
// values (Node keeps the first authorization/host/content-type, other stacks keep the last).
// Each gets a bit, so the per-request duplicate check allocates nothing.
// prettier-ignore
const SINGLE: ReadonlyMap<string, number> = new Map(
  [
    'mcp-protocol-version', 'mcp-method', 'mcp-name', 'mcp-session-id', 'authorization', 'origin',
    'host', 'content-type', 'content-length', 'content-encoding', 'transfer-encoding',
  ].map((name, i) => [name, 1 << i]),
)

/** Reads the header block once; undefined fields mean "absent". */
export function readRequestHead(
  raw: readonly string[],
  rules: HeaderRules = DEFAULT_HEADER_RULES,
): RequestHead {
  let version, method, name, sessionId, origin, host, authorization, contentType
  let contentLength: number | undefined
  let contentEncoding, duplicate, connection: string | undefined
  let seen = 0
  const dropped = rules.dropped
  const forward: string[] = []
  for (let i = 0; i < raw.length; i += 2) {
    const key = (raw[i] as string).toLowerCase()
    const value = raw[i + 1] as string
    const bit = SINGLE.get(key)
    if (bit !== undefined) {
      if ((seen & bit) !== 0) duplicate ??= key
      seen |= bit
    }
    // prettier-ignore
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
      // Several Connection headers make one list (RFC 9110 §5.3).
      case 'connection': connection = connection ? `${connection},${value}` : value; break
    }
    // SECURITY: client copies of what the gateway sets (configured headers included) are dropped
    // here, so the gateway's value replaces them instead of joining them.
    if (dropped.has(key) || isForwardedFamily(key)) continue
    if (key.includes('_') && isUnderscoreTwin(key, rules)) continue
    forward.push(raw[i] as string, value)
  }
  let nominatesOwned: string | undefined
  let fwd = forward
  if (connection !== undefined && !isPlainConnection(connection)) {
    const hop = nominations(connection, rules)
    if (typeof hop === 'string') nominatesOwned = hop
    else if (hop !== undefined) fwd = withoutNames(forward, hop)
  }
  // prettier-ignore
  return {
    version, method, name, sessionId, origin, host, authorization, contentType, contentLength,
    contentEncoding, duplicate, nominatesOwned, count: raw.length / 2, forward: fwd,
  }
}

/** `keep-alive` or `close` alone, the only Connection values most clients send: nothing to do. */
function isPlainConnection(value: string): boolean {
  const v = value.length <= 10 ? value.toLowerCase() : ''
  return v === 'keep-alive' || v === 'close'
}

/**
 * Reads the Connection list (RFC 9110 §7.6.1: comma-separated, case-insensitive, optional
 * whitespace). Returns the first name the gateway owns, or the other nominated names still in
 * the forward list, or undefined when there are none.
 */
function nominations(connection: string, rules: HeaderRules): string | Set<string> | undefined {
  let hop: Set<string> | undefined
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase()
    if (name === '' || name === 'close' || name === 'keep-alive') continue
    // SECURITY: a header the gateway judged or sets would be dropped after the decision.
    if (isOwnedName(name, rules)) return name
    if (!rules.dropped.has(name)) (hop ??= new Set()).add(name)
  }
  return hop
}

/** RFC 9110 §7.6.1: the headers Connection names are hop-by-hop, so they are not forwarded. */
function withoutNames(forward: readonly string[], names: ReadonlySet<string>): string[] {
  const out: string[] = []
  for (let i = 0; i < forward.length; i += 2) {
    const name = forward[i] as string
    if (!names.has(name.toLowerCase())) out.push(name, forward[i + 1] as string)
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
