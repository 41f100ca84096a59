import { encodeHeaderValue } from '../mcp/headers.js'
import { PARAM_HEADER_PREFIX, paramHeaders, type ParamDeclaration } from '../mcp/param-headers.js'
import { setTraceHeaders } from '../telemetry/propagate.js'
import type { EndpointCall } from './call.js'

/**
 * What a request to a server carries besides the client's judged headers, when it is not the
 * client's request as sent: a virtual server's member request names the member's own tool, or is
 * a list read the gateway makes to route a call; a 2025-era session id is the backend's, unsealed.
 */
export interface HeaderChanges {
  /** `Mcp-Method` of a request that is another method than the client's. */
  readonly method?: string | undefined
  /** `Mcp-Name`: a string replaces the client's (sent in the SEP-2243 encoding), null removes it. */
  readonly name?: string | null | undefined
  /** `Mcp-Session-Id`: a string replaces the client's handle, null removes it. */
  readonly sessionId?: string | null | undefined
  /**
   * The target tool's parameter headers (mcp/param-headers.ts), for a `tools/call` whose client
   * cannot send them (a 2025-era client of a virtual server, to a 2026-07-28 member): derived
   * from the call's judged arguments in place of every client `Mcp-Param-*`.
   */
  readonly params?: readonly ParamDeclaration[] | undefined
}

/**
 * The upstream request headers, built here and nowhere else, for a direct request and for every
 * member request of a virtual server alike (docs/security.md "What the gateway owns on the way
 * out"): the judged client headers, the server's configured ones, its credentials, the
 * gateway-owned identity headers, and the gateway span's trace context. A client's W3C `baggage`
 * is not among the judged headers (mcp/owned-headers.ts): a backend may read identity from it, so
 * only `propagation` carries one, and only with `telemetry.propagateBaggage` (telemetry/tracing.ts).
 *
 * SECURITY: every name added after `head.forward` was dropped from it whatever its case
 * (readRequestHead with the server's HeaderRules), so each value below replaces the client's
 * copies instead of joining them; the judged MCP-Protocol-Version, Mcp-Method and Mcp-Name stay as
 * received unless `changes` replaces them (a config cannot name them: mcp/owned-headers.ts).
 */
export function forwardHeaders(
  upstreamHeaders: readonly string[],
  call: Pick<EndpointCall, 'head' | 'peer' | 'mcp'>,
  auth: string | undefined,
  propagation: Readonly<Record<string, string>> | undefined,
  changes: HeaderChanges | undefined,
): string[] {
  const head = call.head
  let headers: string[]
  if (changes === undefined) headers = [...head.forward]
  else {
    headers = []
    for (let i = 0; i < head.forward.length; i += 2) {
      const k = (head.forward[i] as string).toLowerCase()
      if (k === 'mcp-method' && changes.method !== undefined) continue
      if (k === 'mcp-name' && changes.name !== undefined) continue
      if (k === 'mcp-session-id' && changes.sessionId !== undefined) continue
      // SECURITY: a header the client's era does not define is no value to trust over the body.
      if (changes.params !== undefined && k.startsWith(PARAM_HEADER_PREFIX)) continue
      headers.push(head.forward[i] as string, head.forward[i + 1] as string)
    }
    if (changes.method !== undefined) headers.push('mcp-method', changes.method)
    if (typeof changes.name === 'string') headers.push('mcp-name', encodeHeaderValue(changes.name))
    if (typeof changes.sessionId === 'string') headers.push('mcp-session-id', changes.sessionId)
    // SECURITY: from the parsed message the policy judged, whose `arguments` are the body's bytes
    // (only `params.name` and `params._meta` are ever rewritten), so the member, which checks
    // the header against the body it runs (spec 2026-07-28 basic/transports/streamable-http
    // §Server Validation), is sent the value it executes.
    if (changes.params !== undefined && changes.params.length > 0)
      headers.push(...paramHeaders(changes.params, call.mcp.message?.params?.arguments))
  }
  headers.push(...upstreamHeaders)
  // SECURITY: the token exchanged for this backend (RFC 8693), never the caller's own.
  if (auth !== undefined) headers.push('authorization', auth)
  // SECURITY: gateway-owned identity headers; client Forwarded / X-Forwarded-* / X-Real-IP never
  // reach a backend (readRequestHead drops them). The gateway's own requests have no client.
  if (call.peer !== undefined)
    headers.push(
      'x-forwarded-for',
      call.peer,
      'x-forwarded-proto',
      'http',
      'x-forwarded-host',
      head.host ?? '',
    )
  // The gateway's span is the backend's parent (docs/operations.md "Context: in and out"), and
  // with propagateBaggage the client's baggage as the W3C propagator re-encodes it.
  if (propagation !== undefined) setTraceHeaders(headers, propagation)
  return headers
}
