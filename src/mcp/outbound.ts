import { MODERN_VERSION } from './protocol.js'

/**
 * How the gateway presents itself in a request to a backend that no client's request is
 * forwarded in: its HTTP method, the MCP method a 2026-07-28 POST carries in `Mcp-Method`, and the
 * 2025-era session the request goes in (its negotiated version and its id), if any.
 */
export interface OutboundRequest {
  readonly http: 'POST' | 'GET' | 'DELETE'
  /** `Mcp-Method` of a 2026-07-28 POST (spec 2026-07-28 streamable-http §Standard Headers). */
  readonly method?: string | undefined
  /** A 2025-era session (spec 2025-11-25 basic/transports §Session Management). */
  readonly session?: { readonly version: string; readonly sessionId?: string | undefined }
}

/**
 * The headers that say what a request is, owned by the gateway for the requests it sends itself:
 * taken out of `base` and set anew, so neither a configured header nor a derived list can make a
 * request claim another era, session, method, name or body than the one it is.
 */
const OWNED: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'accept',
  'last-event-id',
  'mcp-protocol-version',
  'mcp-session-id',
  'mcp-method',
  'mcp-name',
])

/**
 * The one builder of the header list, [name, value, …], of a request the gateway sends a backend
 * outside a client's forwarded request (endpoint/headers.ts `forwardHeaders` builds those, and
 * this then remakes one for a 2025-era session or its GET stream): discovery and listen streams
 * (client/discover.ts, client/listen-stream.ts), the active health probe (upstream/health-check.ts),
 * a held session's messages, GET stream and DELETE (client/era*.ts, client/session-stream.ts).
 * `base` is the server's configured headers, or the member request's list it derives from; what it
 * carries of its own is kept, in order, except the headers the gateway owns (OWNED) and, in a
 * 2025-era session, the `Mcp-Param-*` headers that era does not have. Then, per spec:
 * - POST: `Content-Type: application/json` and `Accept: application/json, text/event-stream`
 *   (spec 2026-07-28 basic/transports/streamable-http §Sending Messages to the Server);
 * - GET: `Accept: text/event-stream` (spec 2025-11-25 basic/transports §Listening for Messages);
 * - the version: the session's, else 2026-07-28, with `Mcp-Method` on a 2026-07-28 POST;
 * - the session's `Mcp-Session-Id`.
 * No `X-Forwarded-*`: these requests are the gateway's own, not a client's it relays (docs/
 * security.md "Upstream headers"); credentials are only what `base` holds (configured headers,
 * or a member request's exchanged token).
 */
export function outboundHeaders(base: readonly string[], req: OutboundRequest): string[] {
  const session = req.session
  const out: string[] = []
  for (let i = 0; i < base.length; i += 2) {
    const name = (base[i] as string).toLowerCase()
    if (OWNED.has(name)) continue
    if (session !== undefined && name.startsWith('mcp-param-')) continue
    out.push(base[i] as string, base[i + 1] as string)
  }
  if (req.http === 'POST')
    out.push('content-type', 'application/json', 'accept', 'application/json, text/event-stream')
  else if (req.http === 'GET') out.push('accept', 'text/event-stream')
  out.push('mcp-protocol-version', session?.version ?? MODERN_VERSION)
  if (session === undefined && req.http === 'POST' && req.method !== undefined)
    out.push('mcp-method', req.method)
  if (session?.sessionId !== undefined) out.push('mcp-session-id', session.sessionId)
  return out
}

/** An MCP `Implementation`: who a request says it comes from. */
export type ClientInfo = Readonly<{ name: string; version: string }>

/**
 * The `_meta` envelope of a 2026-07-28 request (spec 2026-07-28 basic/index: every request
 * carries the protocol version, the client's identity and its capabilities), members in the order
 * the official client writes them.
 */
export function modernEnvelope(
  clientInfo: ClientInfo,
  clientCapabilities: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN_VERSION,
    'io.modelcontextprotocol/clientInfo': clientInfo,
    'io.modelcontextprotocol/clientCapabilities': clientCapabilities,
  }
}
