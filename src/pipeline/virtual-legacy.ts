import type { Context } from 'hono'
import type { Logger } from 'pino'
import type { EdgeCache } from '../cache/edge-cache.js'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import type { McpRequestInfo } from '../mcp/classify.js'
import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { encodeHeaderValue } from '../mcp/headers.js'
import { NAME_PARAMS } from '../mcp/methods.js'
import { GATEWAY_INFO, MODERN_VERSION } from '../mcp/protocol.js'
import type { VirtualRuntime } from '../runtime/runtime.js'
import type { VirtualSession } from '../virtual/client-session.js'
import { modernise } from '../virtual/envelope.js'
import {
  initializeAnswer,
  legacyCapabilities,
  negotiateVersion,
  pingAnswer,
} from '../virtual/legacy-lifecycle.js'
import { endMemberSessions } from '../client/era.js'
import type { Endpoints } from '../endpoint/endpoint.js'
import { endLegacyListens, legacyListen } from '../virtual/listen.js'
import type { MemberHeaders } from '../virtual/request.js'
import { respond, virtualContext } from './virtual-answer.js'
import { callOf } from './endpoint-call.js'
import { modernEnvelope } from '../mcp/outbound.js'

/** Request headers that name the era, the session or the routing: replaced when modernising. */
const REPLACED = new Set(['mcp-protocol-version', 'mcp-session-id', 'mcp-method', 'mcp-name'])

/** The 2025-era client session of a request, or undefined for a 2026-07-28 client. */
export function sessionOf(c: Context<GatewayEnv>): VirtualSession | undefined {
  return c.get('virtualSession')
}

/** What the stage does after {@link legacyFront}: nothing more, or finish an `initialize`. */
export type LegacyTurn =
  | { readonly kind: 'answered'; readonly response: Response }
  | { readonly kind: 'continue'; readonly finish: (res: Response) => Promise<Response> }

const passThrough = (res: Response): Promise<Response> => Promise.resolve(res)

/**
 * A 2025-era client of a virtual server (docs/virtual-servers.md "2025-era clients"). The gateway
 * holds the session: `initialize` is answered from the members' merged discovery with a session id
 * the gateway seals itself, `ping` and the GET stream are answered here, DELETE ends the session,
 * and every other request is checked against its session and then served as the 2026-07-28
 * request it carries (virtual/envelope.ts), so members of either era and the stage's routing,
 * policy and cache see one protocol.
 */
export async function legacyFront(
  c: Context<GatewayEnv>,
  v: VirtualRuntime,
  log: Logger,
  deps?: {
    readonly cache: EdgeCache | undefined
    readonly headersFor: MemberHeaders
    /** Every server's endpoint: the GET stream's member streams are admitted by their member's. */
    readonly endpoints: Endpoints
  },
): Promise<LegacyTurn> {
  const codec = v.clientSessions
  const owner = c.get('principal')
  const head = c.get('head')
  const method = c.env.incoming.method
  const mcp = c.get('mcp')
  const message = mcp.message
  if (method === 'POST' && message?.method === 'initialize' && message.kind === 'request') {
    const params = message.params ?? {}
    const version = negotiateVersion(params.protocolVersion)
    const { token, session } = v.clientSessions.issue(version, params, owner)
    c.set('virtualSession', session)
    const discover = discoverMessage(message.rawId as string, session)
    c.set(
      'body',
      Buffer.from(
        `{"jsonrpc":"2.0","id":${message.rawId as string},"method":"server/discover","params":${JSON.stringify(discover.params)}}`,
      ),
    )
    asModern(c, mcp, discover)
    return { kind: 'continue', finish: (res) => initialized(c, res, version, token) }
  }
  // spec 2025-11-25 basic/transports §Session Management: a server that issued a session id
  // SHOULD answer requests without one (other than initialize) with 400.
  if (head.sessionId === undefined)
    throw new GatewayError('invalid_request', 'Mcp-Session-Id is required after initialize')
  const session = codec.open(head.sessionId, owner)
  // SECURITY: unknown, tampered and other callers' ids are refused, never guessed at; the 404
  // makes the client start a new session (spec 2025-11-25 §Session Management).
  if (session === undefined) throw new GatewayError('session_not_found')
  c.set('virtualSession', session)
  // The standalone GET stream (SH §Listening for Messages from the Server): the members' change
  // notifications, merged (virtual-listen.ts); 405 when no member offers any.
  if (method === 'GET') {
    if (deps === undefined) throw new GatewayError('method_not_allowed')
    const { cache, headersFor, endpoints } = deps
    const out = { outcome: undefined, upstreamId: undefined }
    // prettier-ignore
    const stream = {
      v, ctx: virtualContext(c), call: callOf(c), res: c.env.outgoing, out, principal: owner, log,
      cache, headersFor, endpoints,
    }
    return { kind: 'answered', response: respond(c, out, await legacyListen(stream, session)) }
  }
  if (method === 'DELETE') {
    endLegacyListens(v, session)
    await endMemberSessions(v.eras, v.members, session, log, v.name)
    c.set('outcome', 'ok')
    return { kind: 'answered', response: c.body(null, 200) }
  }
  if (message === undefined || message.kind !== 'request')
    return { kind: 'continue', finish: passThrough } // notifications: accepted by the stage
  if (message.method === 'ping') {
    c.set('outcome', 'ok')
    return {
      kind: 'answered',
      response: c.body(pingAnswer(message.rawId as string), 200, {
        'content-type': 'application/json',
      }),
    }
  }
  const modern = modernise(c.get('body').toString('utf8'), message, session)
  if (modern === undefined) throw new GatewayError('invalid_params', 'params must be an object')
  c.set('body', modern.body)
  asModern(c, mcp, modern.message)
  return { kind: 'continue', finish: passThrough }
}

/** The session's `server/discover`, which the merged capabilities of `initialize` come from. */
function discoverMessage(rawId: string, session: VirtualSession): JsonRpcMessage {
  return {
    kind: 'request',
    method: 'server/discover',
    rawId,
    params: { _meta: modernEnvelope(session.clientInfo, session.capabilities) },
  }
}

/**
 * Makes the request the stage sees the 2026-07-28 one: the classification, the routing headers
 * the members receive (MCP-Protocol-Version, Mcp-Method, Mcp-Name as a 2026-07-28 client sends
 * them), and no session id. SECURITY: the gateway's own session id never reaches a member.
 */
function asModern(c: Context<GatewayEnv>, mcp: McpRequestInfo, message: JsonRpcMessage): void {
  const head = c.get('head')
  const forward: string[] = []
  for (let i = 0; i < head.forward.length; i += 2) {
    const k = (head.forward[i] as string).toLowerCase()
    if (REPLACED.has(k) || k === 'content-length') continue
    forward.push(head.forward[i] as string, head.forward[i + 1] as string)
  }
  const method = message.method as string
  forward.push('mcp-protocol-version', MODERN_VERSION, 'mcp-method', method)
  const name = nameOf(method, message.params)
  if (name !== undefined) forward.push('mcp-name', encodeHeaderValue(name))
  c.set('head', {
    ...head,
    forward,
    version: MODERN_VERSION,
    method,
    name: name === undefined ? undefined : encodeHeaderValue(name),
    sessionId: undefined,
  })
  c.set('mcp', { ...mcp, era: 'modern', version: MODERN_VERSION, method, message })
}

/** The Mcp-Name of a 2026-07-28 request (SEP-2243): tool or prompt name, or resource URI. */
function nameOf(method: string, params: JsonRpcMessage['params']): string | undefined {
  // The events extension mirrors no name into Mcp-Name (SEP-3415).
  const named = NAME_PARAMS.get(method)
  const v = named === undefined || named.kind === 'event' ? undefined : params?.[named.field]
  return typeof v === 'string' ? v : undefined
}

/** The `initialize` answer from the merged discovery, with the session id (spec 2025-11-25). */
async function initialized(
  c: Context<GatewayEnv>,
  res: Response,
  version: string,
  token: string,
): Promise<Response> {
  const parsed: unknown = await res.json()
  const result = isRecord(parsed) && isRecord(parsed.result) ? parsed.result : undefined
  const mcp = c.get('mcp')
  if (result === undefined) throw new GatewayError('upstream_bad_response', 'no merged discovery')
  const caps = isRecord(result.capabilities) ? result.capabilities : {}
  const instructions = typeof result.instructions === 'string' ? result.instructions : undefined
  const body = initializeAnswer(
    mcp.message?.rawId as string,
    version,
    legacyCapabilities(caps),
    GATEWAY_INFO,
    instructions,
  )
  c.set('outcome', 'ok')
  return c.body(body, 200, { 'content-type': 'application/json', 'mcp-session-id': token })
}
