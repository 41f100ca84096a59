import type { Principal } from '../auth/principal.js'
import { REQUEST_STATE_PREFIX, type UserTokenSource } from '../auth/user-tokens.js'
import { GatewayError } from '../errors.js'
import { isRecord, parseMessage, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { MODERN_VERSIONS } from '../mcp/protocol.js'
import { locate } from '../mcp/rewrite.js'
import type { EndpointCall } from './call.js'

/**
 * What a caller without the user's token at a `userAuth` server is answered (docs/auth.md §Per-user
 * credentials), in its era: the decision is the endpoint's (endpoint/exchange.ts), so a direct
 * request and every virtual member request get the same answer.
 */

/** The methods whose results may be `input_required` (spec 2026-07-28 basic/patterns/mrtr §Supported Requests). */
const MRTR_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read'])
const CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities'
/** The `_meta` key of the gateway's answers that name a connect page. */
export const CONNECT_META = 'io.github.mcp-edge/connect'
/** Deep enough for any envelope; the body was judged before (a member body is the client's). */
const MAX_DEPTH = 64

/** The key of the gateway's one input request: the server it asks the user to connect. */
function inputKey(server: string): string {
  return `connect:${server}`
}

/** An in-band answer in the server's name (a JSON-RPC body on HTTP 200). */
export interface ConnectAnswer {
  readonly kind: 'answer'
  readonly outcome: string
  readonly body: string
}

/** The parsed message of the call (parsed here when the request was forwarded on its headers). */
function messageOf(call: EndpointCall): JsonRpcMessage | undefined {
  if (call.mcp.message !== undefined) return call.mcp.message
  if (call.http !== 'POST' || call.body.length === 0) return undefined
  try {
    return parseMessage(call.body, MAX_DEPTH)
  } catch {
    return undefined
  }
}

/**
 * The answer for a caller who has not connected: a URL elicitation where the era and the method
 * allow one, else an error whose message and `data` name the connect page. Throws the errors.
 */
export function connectAnswer(
  call: EndpointCall,
  server: string,
  users: UserTokenSource,
  principal: Principal,
): ConnectAnswer {
  const message = messageOf(call)
  const method = call.mcp.method ?? message?.method
  const url = users.connectUrl(principal)
  const prompt = `Connect your ${users.service} account to continue (opens in your browser).`
  const detail = `open ${url} to connect your ${users.service} account`
  const data = { connectUrl: url, server, service: users.service }
  if (call.mcp.era === 'legacy') {
    // Spec 2025-11-25 client/elicitation §URL Elicitation Required Error. The message names the
    // URL too: a direct server's 2025-era session is the backend's, so the gateway does not know
    // whether the client declared URL elicitation at `initialize`.
    const elicitation = { mode: 'url', elicitationId: elicitationId(url), url, message: prompt }
    throw new GatewayError('url_elicitation_required', {
      detail,
      data: { elicitations: [elicitation], ...data },
    })
  }
  const rawId = message?.rawId
  if (method !== undefined && MRTR_METHODS.has(method) && rawId !== undefined) {
    // SECURITY: spec 2026-07-28 basic/patterns/mrtr: never an input request the client has not
    // declared support for; the client then gets -32021 naming the capability and the URL.
    if (!declaresUrlElicitation(message))
      throw new GatewayError('elicitation_not_supported', {
        detail,
        data: { requiredCapabilities: { elicitation: { url: {} } }, ...data },
      })
    const result = {
      resultType: 'input_required',
      inputRequests: {
        [inputKey(server)]: {
          method: 'elicitation/create',
          params: { mode: 'url', url, message: prompt },
        },
      },
      requestState: users.requestState(principal, method),
    }
    return { kind: 'answer', outcome: 'user_connect_elicited', body: rpcResult(rawId, result) }
  }
  if (method === 'server/discover' && rawId !== undefined) {
    // A client negotiates its era by discovery before it calls anything (spec 2026-07-28
    // server/discover): answered in the server's name, its capabilities as calls need them, so
    // the first call can ask the user to connect; nothing is forwarded without the user's token.
    const result = {
      resultType: 'complete',
      supportedVersions: MODERN_VERSIONS,
      capabilities: { tools: {}, prompts: {}, resources: {} },
      instructions: `Connect your ${users.service} account to use this server: ${url}`,
      ttlMs: 0,
      cacheScope: 'private',
      _meta: { [CONNECT_META]: [data] },
    }
    return { kind: 'answer', outcome: 'user_connect_pending', body: rpcResult(rawId, result) }
  }
  // Lists and every other request: spec 2026-07-28 allows `input_required` on calls only.
  throw new GatewayError('user_connect_required', { detail, data })
}

/**
 * The gateway's connect prompt as a 2025-era client gets it (spec 2025-11-25 client/elicitation
 * §URL Elicitation Required Error), for a request the virtual server modernised for a member
 * (pipeline/virtual-legacy.ts): the member's endpoint answered `input_required`, which that era
 * does not have. Throws the -32042 error; any other answer is left alone.
 */
export function asLegacyPrompt(answer: { readonly outcome: string; readonly body: string }): void {
  if (answer.outcome !== 'user_connect_elicited') return
  const parsed: unknown = JSON.parse(answer.body)
  const result = isRecord(parsed) && isRecord(parsed.result) ? parsed.result : {}
  const requests = isRecord(result.inputRequests) ? Object.values(result.inputRequests) : []
  const first: unknown = requests[0]
  const params = isRecord(first) && isRecord(first.params) ? first.params : {}
  const url = typeof params.url === 'string' ? params.url : ''
  const message = typeof params.message === 'string' ? params.message : ''
  const elicitation = { mode: 'url', elicitationId: elicitationId(url), url, message }
  throw new GatewayError('url_elicitation_required', {
    detail: `open ${url} to connect your account`,
    data: { elicitations: [elicitation], connectUrl: url },
  })
}

/** What the user said to the gateway's prompt on this retry, if it is a retry of the gateway's. */
export type PromptAnswer = 'none' | 'accept' | 'decline'

/**
 * A retry of the gateway's own `input_required` (spec 2026-07-28 basic/patterns/mrtr §Basic
 * Workflow): its `requestState` and `inputResponses` are the gateway's, so they are taken out of
 * the body before it is forwarded (the server never issued them, and must reject state it cannot
 * verify). Anything else is forwarded as it came.
 */
export function ownRetry(
  call: EndpointCall,
  server: string,
  users: UserTokenSource,
  principal: Principal,
): { readonly call: EndpointCall; readonly answer: PromptAnswer } {
  if (call.http !== 'POST' || call.body.indexOf('requestState') < 0) return NONE(call)
  const message = messageOf(call)
  const params = message?.params
  const state = params?.requestState
  if (message === undefined || params === undefined || typeof state !== 'string') return NONE(call)
  if (!state.startsWith(REQUEST_STATE_PREFIX)) return NONE(call)
  const responses = isRecord(params.inputResponses) ? params.inputResponses : undefined
  const mine = responses?.[inputKey(server)]
  const action = isRecord(mine) ? mine.action : undefined
  const onlyMine =
    responses !== undefined && Object.keys(responses).length === 1 && mine !== undefined
  let text = call.body.toString('utf8')
  const keys = onlyMine ? ['requestState', 'inputResponses'] : ['requestState']
  for (const key of keys) {
    const cut = withoutParam(text, key)
    // SECURITY: a key the gateway cannot take out exactly is refused, never forwarded half-cut.
    if (cut === undefined) throw new GatewayError('invalid_params', `unreadable params.${key}`)
    text = cut
  }
  const { requestState: _s, inputResponses: _r, ...rest } = params
  const kept = onlyMine || responses === undefined ? rest : { ...rest, inputResponses: responses }
  const rewritten: EndpointCall = {
    ...call,
    body: Buffer.from(text, 'utf8'),
    mcp: { ...call.mcp, message: { ...message, params: kept } },
  }
  // The state only says whether this is an answer to the gateway's own prompt; whether a token
  // is stored decides the rest. A state that is not this caller's is no answer, so never waited on.
  const ours = users.issued(principal, message.method ?? '', state)
  const answer = !ours
    ? 'none'
    : action === 'accept'
      ? 'accept'
      : action === undefined
        ? 'none'
        : 'decline'
  return { call: rewritten, answer }
}

const NONE = (call: EndpointCall) => ({ call, answer: 'none' as const })

/** The body without `params.<key>` (its member and one comma), every other byte kept. */
function withoutParam(text: string, key: string): string | undefined {
  const span = locate(text, ['params', key])
  if (span === undefined) return undefined
  const name = JSON.stringify(key)
  const at = text.lastIndexOf(name, span[0])
  if (at < 0 || !/^\s*:\s*$/.test(text.slice(at + name.length, span[0]))) return undefined
  let start = at
  let end = span[1]
  const after = /^\s*,/.exec(text.slice(end))
  if (after !== null) end += after[0].length
  else {
    const before = /,\s*$/.exec(text.slice(0, start))
    if (before !== null) start -= before[0].length
  }
  return text.slice(0, start) + text.slice(end)
}

/** Whether the request declares URL elicitation (spec 2026-07-28 client/elicitation §Capabilities). */
function declaresUrlElicitation(message: JsonRpcMessage | undefined): boolean {
  const meta = message?.params?._meta
  const caps = isRecord(meta) ? meta[CAPABILITIES] : undefined
  const elicitation = isRecord(caps) ? caps.elicitation : undefined
  return isRecord(elicitation) && isRecord(elicitation.url)
}

function rpcResult(rawId: string, result: Record<string, unknown>): string {
  return `{"jsonrpc":"2.0","id":${rawId},"result":${JSON.stringify(result)}}`
}

/** A stable id per link (the spec asks for one per elicitation; the link is one). */
function elicitationId(url: string): string {
  const state = new URL(url).searchParams.get('state') ?? ''
  return state.slice(-32)
}

/** The principal a user-auth decision is for; absent only if the loader was bypassed. */
export function callerOf(call: EndpointCall): Principal {
  // SECURITY: fail closed; the loader refuses userAuth without auth (auth/compile.ts).
  if (call.principal === undefined)
    throw new GatewayError('user_connect_required', 'no verified caller')
  return call.principal
}
