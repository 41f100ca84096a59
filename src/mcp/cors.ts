/**
 * CORS for browser MCP clients (spec streamable-http §Security: Origin is validated first; the
 * front door has already refused an Origin that is not allowed). Only exact allowed origins are
 * echoed, never `*`, and no credentials mode: bearer tokens travel in a header, not cookies.
 */

/** Request headers a browser client may send (SEP-2243 headers, auth, content type, tracing). */
const ALLOWED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'accept',
  'authorization',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'mcp-session-id',
  'last-event-id',
  // W3C Trace Context (§3.2 traceparent, §3.3 tracestate) and W3C Baggage, sent by browser clients
  // with OpenTelemetry instrumentation; the gateway reads them only to parent its span.
  'traceparent',
  'tracestate',
  'baggage',
])
/** Response headers a browser client must be able to read. */
const EXPOSED =
  'mcp-session-id, www-authenticate, retry-after, x-mcp-gateway-error, ratelimit, ratelimit-policy'

/** Headers added to every response to an allowed browser origin. */
export function corsResponseHeaders(origin: string): Record<string, string> {
  return {
    'access-control-allow-origin': origin,
    'access-control-expose-headers': EXPOSED,
    vary: 'Origin',
  }
}

/**
 * The answer to a preflight from an allowed origin: the requested headers are echoed only when
 * each is a known MCP header or an `Mcp-Param-*` (SEP-2243 custom headers), else undefined.
 */
export function preflightHeaders(
  origin: string,
  requestedHeaders: string | undefined,
): Record<string, string> | undefined {
  const requested = (requestedHeaders ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h.length > 0)
  if (!requested.every((h) => ALLOWED_REQUEST_HEADERS.has(h) || h.startsWith('mcp-param-')))
    return undefined
  return {
    ...corsResponseHeaders(origin),
    'access-control-allow-methods': 'POST, GET, DELETE',
    'access-control-allow-headers': requested.join(', '),
    'access-control-max-age': '600',
  }
}
