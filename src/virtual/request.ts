import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import type { AuthRuntime } from '../auth/compile.js'
import type { Principal } from '../auth/principal.js'
import type { EdgeCache } from '../cache/edge-cache.js'
import type { ServerCatalog } from '../catalog/curate.js'
import type { AskServer } from '../client/ask.js'
import { callerKey, type EndpointCall } from '../endpoint/call.js'
import type { EraCaller } from '../client/era.js'
import type { ClientSession } from '../client/era-session.js'
import type { HeaderChanges } from '../endpoint/headers.js'
import type { Endpoints } from '../endpoint/endpoint.js'
import { GatewayError } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import type { ParamDeclaration } from '../mcp/param-headers.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import { renderDenial } from '../policy/denial.js'
import type { PolicySet } from '../policy/policy.js'
import type { VirtualCore } from './compile.js'
import type { SessionListens } from './session-listens.js'

/** A member as a virtual server reaches it (runtime/runtime.ts ServerRuntime has all of it). */
export interface MemberServer extends AskServer {
  /** Curation and pins (docs/catalog.md); undefined when the member has neither. */
  readonly catalog?: ServerCatalog | undefined
}

/** A compiled virtual server over its members (runtime/runtime.ts VirtualRuntime). */
export interface VirtualServer extends VirtualCore {
  readonly members: readonly MemberServer[]
  /** The 2025-era sessions' GET streams of the gateway (virtual/session-listens.ts). */
  readonly listens: SessionListens
}

/**
 * The headers a member request of a caller carries (endpoint/headers.ts: the judged client
 * headers, the member's configured ones, its exchanged token, X-Forwarded-*), for `method`.
 */
export type MemberHeaders = (
  member: MemberServer,
  body: Buffer,
  method: string,
) => Promise<string[]>

/** What a virtual request reads of the runtime it is served by. */
export interface VirtualContext {
  /** The compiled org-wide allowlist; undefined without `policies:`. */
  readonly policy: PolicySet | undefined
  readonly auth: AuthRuntime | undefined
  readonly limits: { readonly maxInspectBytes: number; readonly maxStreamsPerPrincipal: number }
}

/** What the access log and the span learn of a virtual request, set by its handler. */
export interface VirtualOutcome {
  outcome: string | undefined
  upstreamId: string | undefined
}

/**
 * One request to a virtual server, as its handler sees it: hono-free, so each handler is the
 * same code whichever way the request came in (docs/design/member-path.md).
 */
export interface VirtualRequest {
  readonly v: VirtualServer
  readonly deps: VirtualDeps
  readonly ctx: VirtualContext
  /** The client's judged request (endpoint/call.ts); member requests are derived from it. */
  readonly call: EndpointCall
  /** The 2025-era client session (pipeline/virtual-legacy.ts); undefined for 2026-07-28. */
  readonly session: ClientSession | undefined
  /** Where a member's streamed answer is written. */
  readonly res: ServerResponse
  readonly out: VirtualOutcome
  readonly message: JsonRpcMessage
  readonly method: string
  readonly rawId: string
  /** The judged body text. */
  readonly text: string
  readonly principal: Principal | undefined
}

/** A handler's answer: a JSON-RPC body (HTTP status and text), or one already written to `res`. */
export type Answer =
  | { readonly kind: 'json'; readonly status: number; readonly body: string }
  | { readonly kind: 'sent' }

/** A member's answer was streamed to the client. */
export const SENT: Answer = Object.freeze({ kind: 'sent' })

/** A JSON-RPC body on HTTP 200 (an answer in the backend's name). */
export function json(body: string, status = 200): Answer {
  return { kind: 'json', status, body }
}

/** What the virtual stage needs from the process. */
export interface VirtualDeps {
  readonly log: Logger
  readonly metrics: GatewayMetrics
  /** The edge cache, when `cache:` is configured: members' answers are cached as on their own endpoints. */
  readonly cache: EdgeCache | undefined
  /**
   * Every server's endpoint (endpoint/endpoint.ts): each member request is admitted by its
   * member's, so it is judged, limited and audited by what that member's own endpoint runs.
   */
  readonly endpoints: Endpoints
}

/** Who a member request is made for. */
export type Caller = Pick<VirtualRequest, 'call' | 'principal' | 'session'>

export type VirtualHandler = (r: VirtualRequest) => Promise<Answer>

/**
 * The member request of a caller (endpoint/call.ts): the client's judged request with the
 * member's targets and body. `method` is the member request's own (a list read to route a call).
 */
export function memberCall(
  r: Caller,
  body: Buffer,
  method: string,
  targets: readonly McpTarget[],
): EndpointCall {
  const c = r.call
  const mcp = c.mcp
  // Written out, not spread: a routed call makes one per request.
  return {
    http: 'POST',
    requestId: c.requestId,
    mcp: {
      era: mcp.era,
      version: mcp.version,
      method,
      kind: 'request',
      targets,
      verified: mcp.verified,
      message: mcp.message,
    },
    head: c.head,
    body,
    principal: c.principal,
    peer: c.peer,
    headers: c.headers,
    trace: c.trace,
    span: c.span,
  }
}

/**
 * What the member gets beside the client's judged headers (endpoint/headers.ts): `Mcp-Method` /
 * `Mcp-Name` replaced when the member request is another method or a prefix came off the name,
 * and a 2025-era client's call its tool's parameter headers (docs/virtual-servers.md).
 * SECURITY: a session id is the gateway's own (pipeline/virtual-legacy.ts), never a member's.
 */
export function memberChanges(
  method: string | undefined,
  name: string | null | undefined,
  params?: readonly ParamDeclaration[],
): HeaderChanges {
  return { method, name, sessionId: null, params }
}

/** The body of a list read the gateway sends a member on the client's behalf (to route a call). */
export function readBody(r: VirtualRequest, method: string, cursor: string | undefined): string {
  const meta = r.message.params?._meta
  const params = {
    ...(cursor === undefined ? {} : { cursor }),
    ...(meta === undefined ? {} : { _meta: meta }),
  }
  return `{"jsonrpc":"2.0","id":${r.rawId},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`
}

/** A merged answer, with the request's id exactly as the client wrote it. */
export function answer(
  r: VirtualRequest,
  result: Readonly<Record<string, unknown>>,
  outcome: string,
): Answer {
  r.out.outcome = outcome
  const body = `{"jsonrpc":"2.0","id":${r.rawId},"result":${JSON.stringify(result)}}`
  return json(body)
}

/** An answer the gateway gives in a member's name (a JSON-RPC body on HTTP 200). */
export function inBand(r: VirtualRequest, outcome: string, text: string): Answer {
  r.out.outcome = outcome
  return json(text)
}

/** What a server answers for a target it does not have (policy/denial.ts), in the exposed name. */
export function denied(r: VirtualRequest, target: McpTarget, outcome = 'policy_denied'): Answer {
  r.out.outcome = outcome
  return json(renderDenial(target, r.rawId))
}

export function valueAt(root: unknown, path: readonly string[]): unknown {
  let cur = root
  for (const k of path) {
    if (!isRecord(cur)) return undefined
    cur = cur[k]
  }
  return cur
}

/** Whose member sessions a request to a 2025-only member uses (client/era.ts). */
export function eraCaller(r: Caller & Pick<VirtualRequest, 'deps'>): EraCaller {
  return {
    session: r.session,
    owner: callerKey(r.principal, r.call.peer),
    log: r.deps.log,
  }
}

export function lacksMethod(message: Readonly<Record<string, unknown>>): boolean {
  return isRecord(message.error) && message.error.code === -32601
}

export function toCode(err: unknown): string | undefined {
  return err instanceof GatewayError ? err.code : err instanceof Error ? err.name : undefined
}
