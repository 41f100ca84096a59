/**
 * The one error table: every way the gateway itself can refuse or fail a request.
 *
 * Spec codes are used where the spec defines one (-32700, -32600, -32601, -32602, -32020,
 * -32022; basic/index.mdx, SEP-2243). The gateway's own failures get application codes outside
 * -32768..-32000 (basic/index.mdx: new codes SHOULD be outside that range) and carry
 * `error.data.source: "gateway"` plus the `X-MCP-Gateway-Error` header, so a client can never
 * mistake them for an answer from the backend.
 */
export interface ErrorSpec {
  readonly status: number
  readonly rpc: number
  readonly message: string
}

export const ERRORS = {
  // Front door (docs/design/check-order.md steps 1-5)
  method_not_allowed: { status: 405, rpc: -32600, message: 'Method not allowed: use POST' },
  unknown_server: { status: 404, rpc: -32601, message: 'Unknown MCP server' },
  origin_not_allowed: { status: 403, rpc: -31003, message: 'Origin not allowed' },
  host_not_allowed: { status: 403, rpc: -31003, message: 'Host not allowed' },
  too_many_headers: { status: 431, rpc: -31013, message: 'Too many request headers' },
  duplicate_header: { status: 400, rpc: -32600, message: 'Duplicate request header' },
  // SECURITY: a header named in Connection is dropped by every hop (RFC 9110 §7.6.1); one the
  // gateway reads or sets would be judged here and missing at the backend.
  connection_nominates_owned: {
    status: 400,
    rpc: -32600,
    message: 'Bad Request: the Connection header names a header the gateway relies on',
  },
  body_too_large: { status: 413, rpc: -31013, message: 'Request body too large' },
  body_timeout: { status: 408, rpc: -31008, message: 'Request body not received in time' },
  unsupported_media_type: {
    status: 415,
    rpc: -32600,
    message: 'Unsupported Media Type: Content-Type must be application/json',
  },
  content_encoding: { status: 415, rpc: -32600, message: 'Content-Encoding is not supported' },
  // Authentication and authorization (docs/auth.md, docs/policy.md)
  unauthenticated: { status: 401, rpc: -31001, message: 'Authentication required' },
  invalid_token: { status: 401, rpc: -31001, message: 'Invalid access token' },
  insufficient_scope: { status: 403, rpc: -31003, message: 'Insufficient scope' },
  // The token is valid, but was issued to a client application the server does not admit
  // (docs/auth.md §Client applications); the message names neither the client nor the list.
  client_not_allowed: {
    status: 403,
    rpc: -31003,
    message: 'This client application may not use this server',
  },
  auth_unavailable: { status: 503, rpc: -31503, message: 'Token verification unavailable' },
  token_in_query: {
    status: 401,
    rpc: -31001,
    message: 'Access tokens are accepted in the Authorization header only',
  },
  token_exchange_failed: { status: 502, rpc: -31502, message: 'Upstream credentials unavailable' },
  // Per-user credentials (docs/auth.md §Per-user credentials): the caller has not connected their
  // account at the server's service. `data.connectUrl` names the connect page, as the message does.
  user_connect_required: {
    status: 403,
    rpc: -31003,
    message: 'Connect your account at this service first',
  },
  // A 2026-07-28 call the gateway would answer with a URL elicitation, from a client that declared
  // none: spec 2026-07-28 schema MissingRequiredClientCapabilityError (-32021, HTTP 400).
  elicitation_not_supported: {
    status: 400,
    rpc: -32021,
    message: 'This request needs the URL elicitation capability to connect your account',
  },
  // A 2025-era client without the user's token: spec 2025-11-25 client/elicitation §URL Elicitation
  // Required Error (-32042, `data.elicitations`). HTTP 200: a 2025-era client reads a JSON-RPC
  // error only from a successful HTTP answer, and this one it must read to show the URL.
  url_elicitation_required: {
    status: 200,
    rpc: -32042,
    message: 'URL elicitation required: connect your account at this service',
  },
  // The token store or the service's authorization server could not be asked, and the stored
  // token cannot be used without them: fail closed, never a prompt to connect again.
  user_token_unavailable: {
    status: 503,
    rpc: -31503,
    message: 'Your account at this service is unavailable right now',
  },
  // Message shape and SEP-2243 checks
  parse_error: { status: 400, rpc: -32700, message: 'Parse error: invalid JSON' },
  invalid_request: { status: 400, rpc: -32600, message: 'Invalid Request' },
  batch_not_supported: {
    status: 400,
    rpc: -32600,
    message: 'Invalid Request: JSON-RPC batches are not supported',
  },
  duplicate_key: { status: 400, rpc: -32600, message: 'Invalid Request: duplicate JSON key' },
  case_variant_key: {
    status: 400,
    rpc: -32600,
    message: 'Invalid Request: other JSON readers may take a key for another key',
  },
  prototype_key: { status: 400, rpc: -32600, message: 'Invalid Request: reserved JSON key' },
  invalid_id: {
    status: 400,
    rpc: -32600,
    message: 'Invalid Request: id must be a string or an integer',
  },
  json_too_deep: { status: 400, rpc: -32600, message: 'Invalid Request: JSON nested too deeply' },
  invalid_params: { status: 400, rpc: -32602, message: 'Invalid params' },
  invalid_name: {
    status: 400,
    rpc: -32602,
    message: 'Invalid params: the name contains characters that are not allowed',
  },
  uri_not_normalized: {
    status: 400,
    rpc: -32602,
    message: 'Invalid params: the resource URI is not in normal form',
  },
  header_mismatch: {
    status: 400,
    rpc: -32020,
    message: 'Bad Request: the request headers and body disagree',
  },
  unsupported_version: { status: 400, rpc: -32022, message: 'Unsupported protocol version' },
  legacy_not_allowed: {
    status: 400,
    rpc: -32022,
    message: 'Unsupported protocol version: this server accepts 2026-07-28 clients only',
  },
  session_not_found: { status: 404, rpc: -32001, message: 'Session not found' },
  // Upstream (docs/balancing.md)
  upstream_unavailable: { status: 502, rpc: -31502, message: 'Upstream unavailable' },
  upstream_bad_response: { status: 502, rpc: -31502, message: 'Bad response from upstream' },
  // SECURITY: never followed or relayed: it would send the client (and its token) around the gateway.
  upstream_redirect: { status: 502, rpc: -31502, message: 'Bad response from upstream: redirect' },
  upstream_bad_content_type: {
    status: 502,
    rpc: -31502,
    message: 'Bad response from upstream: unexpected content type',
  },
  // SECURITY: an answer that is not one JSON-RPC response (not one object, no result or error,
  // or both: JSON-RPC 2.0 §5), or one the gateway must filter, curate, pin, splice or cache and
  // cannot read (not strict JSON), is refused, never relayed unchanged.
  upstream_unreadable: {
    status: 502,
    rpc: -31502,
    message: 'Bad response from upstream: the answer could not be read',
  },
  upstream_id_mismatch: {
    status: 502,
    rpc: -31502,
    message: 'Bad response from upstream: the answer does not carry the request id',
  },
  // SECURITY: a skills/get answer is relayed only for the skill policy judged, within the
  // per-skill limits (skills.mdx §Limits: 512 files, 16 MiB); `detail` says which.
  upstream_skill_refused: {
    status: 502,
    rpc: -31502,
    message: 'Bad response from upstream: the skill entry cannot be relayed',
  },
  // SECURITY: with `pinning:`, a skill's manifest or a skill file's bytes that are not the pinned
  // ones (docs/catalog.md §Skills) are refused rather than relayed; `detail` says which.
  upstream_pin_mismatch: {
    status: 502,
    rpc: -31502,
    message: 'Bad response from upstream: the content differs from its pin',
  },
  // In band only: a streamed answer (its 200 head already sent) that ended without its response.
  upstream_stream_broken: {
    status: 502,
    rpc: -31502,
    message: 'Upstream stream ended before the response',
  },
  upstream_timeout: { status: 504, rpc: -31504, message: 'Upstream timed out' },
  // A per-method or per-tool deadline (servers.<name>.timeouts) passed: the upstream request is
  // cancelled; on a stream whose head is out, the error travels in band.
  deadline_exceeded: { status: 504, rpc: -31504, message: 'Deadline exceeded' },
  no_upstream: { status: 503, rpc: -31503, message: 'No upstream available' },
  overloaded: { status: 503, rpc: -31503, message: 'Upstream at capacity' },
  streams_at_capacity: { status: 503, rpc: -31503, message: 'Upstream stream capacity reached' },
  too_many_streams: { status: 429, rpc: -31029, message: 'Too many open streams for this caller' },
  rate_limited: { status: 429, rpc: -31029, message: 'Rate limit exceeded' },
  // A limit's bucket table is full of callers that are not idle: a new key is refused rather than
  // an old caller's bucket forgotten (which would hand it a fresh burst).
  rate_limit_table_full: {
    status: 429,
    rpc: -31029,
    message: 'Rate limit exceeded: too many distinct callers for this limit',
  },
  shutting_down: { status: 503, rpc: -31503, message: 'Gateway shutting down' },
  internal: { status: 500, rpc: -31500, message: 'Internal gateway error' },
} as const satisfies Record<string, ErrorSpec>

export type ErrorCode = keyof typeof ERRORS

/** Statuses that ask the client to come back later; they carry Retry-After. */
const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503])

/**
 * What a GatewayError carries besides its reason: `detail` (safe to show the client), `data`
 * (merged into the JSON-RPC error's `data`), response `headers` it needs (WWW-Authenticate …), and
 * the `cause` for the log.
 */
export interface GatewayErrorOptions extends ErrorOptions {
  readonly detail?: string | undefined
  readonly data?: Readonly<Record<string, unknown>>
  /** Gateway-built values only (never copied from a request or a backend). */
  readonly headers?: Readonly<Record<string, string>>
}

/**
 * A failure the gateway answers itself: `new GatewayError(code)`, `new GatewayError(code, detail)`,
 * or `new GatewayError(code, { detail, data, headers, cause })`.
 */
export class GatewayError extends Error {
  override readonly name = 'GatewayError'
  readonly detail: string | undefined
  readonly data: Readonly<Record<string, unknown>> | undefined
  readonly headers: Readonly<Record<string, string>> | undefined
  constructor(
    readonly code: ErrorCode,
    detailOrOptions?: string | GatewayErrorOptions,
  ) {
    const options =
      typeof detailOrOptions === 'string' ? { detail: detailOrOptions } : (detailOrOptions ?? {})
    const detail = options.detail
    super(
      detail === undefined ? ERRORS[code].message : `${ERRORS[code].message}: ${detail}`,
      options.cause === undefined ? undefined : { cause: options.cause },
    )
    this.detail = detail
    this.data = options.data
    this.headers = options.headers
  }
}

/** A rendered error: status, headers and the exact body bytes. */
export interface RenderedError {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/**
 * Builds the JSON-RPC error reply. `rawId` is the request id exactly as it appeared in the body
 * (so large integers and escaped strings round-trip byte for byte), or undefined when unreadable.
 */
export function renderError(err: GatewayError, rawId: string | undefined): RenderedError {
  const spec = ERRORS[err.code]
  const data = JSON.stringify({ source: 'gateway', reason: err.code, ...err.data })
  const message = JSON.stringify(err.message)
  const id = rawId ?? 'null'
  const body = `{"jsonrpc":"2.0","id":${id},"error":{"code":${spec.rpc},"message":${message},"data":${data}}}`
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'x-mcp-gateway-error': err.code,
  }
  if (RETRY_AFTER_STATUSES.has(spec.status)) headers['retry-after'] = '1'
  if (err.headers !== undefined) Object.assign(headers, err.headers)
  return { status: spec.status, headers, body }
}

/** Turns anything thrown into a GatewayError; unknown errors become `internal`, cause kept. */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  return new GatewayError('internal', { cause: err })
}
