import type { Context, MiddlewareHandler } from 'hono'
import type { Logger } from 'pino'
import type { Principal } from '../auth/principal.js'
import type { CacheRequest, EdgeCache } from '../cache/edge-cache.js'
import { authContextOf } from '../cache/key.js'
import { cacheRequestOf } from '../cache/request.js'
import { memberBackendName, memberListView } from '../catalog/member.js'
import { attemptEvents, callerKey, propagationOf, type EndpointCall } from '../endpoint/call.js'
import { askInEra, streamInEra, type EraCaller } from '../endpoint/era.js'
import { exchangeFor, exchanges } from '../endpoint/exchange.js'
import { forwardHeaders, type HeaderChanges } from '../endpoint/headers.js'
import { judge, type JudgeDeps } from '../endpoint/judge.js'
import { admit, type LimitDeps } from '../endpoint/limit.js'
import { planAttempt } from '../endpoint/plan.js'
import { GatewayError } from '../errors.js'
import { classify, type McpRequestInfo, type McpTarget } from '../mcp/classify.js'
import { isRecord, peekRawId, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { chainFilters } from '../mcp/list-filter.js'
import { uriProblem } from '../mcp/names.js'
import { replaceParam } from '../mcp/rewrite.js'
import {
  mayCarryTaskIds,
  ownTasksListAnswer,
  taskIdHook,
  unknownTaskAnswer,
  type TaskIdSealer,
} from '../mcp/task-ids.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import { renderDenial } from '../policy/denial.js'
import type { ServerRuntime, VirtualRuntime } from '../runtime/runtime.js'
import { EVENT } from '../telemetry/events.js'
import { sendWithRetries } from '../upstream/attempts.js'
import type { PendingPages } from '../virtual/cursor.js'
import { fanOut } from '../virtual/fan-out.js'
import { itemsOf, LISTS, mergeItems, type ListSpec, type MemberPage } from '../virtual/lists.js'
import {
  GATEWAY_INFO,
  mergeCapabilities,
  mergeHints,
  mergeInstructions,
  VIRTUAL_VERSIONS,
} from '../virtual/merge.js'
import { routeResource } from '../virtual/resources.js'
import type { NamedKind } from '../virtual/state.js'
import { legacyResult } from '../virtual/envelope.js'
import { openMemberTask } from '../virtual/tasks.js'
import { callOf } from './endpoint-call.js'
import type { GatewayEnv } from './env.js'
import { ALREADY_SENT } from './node-response.js'
import { legacyFront, sessionOf } from './virtual-legacy.js'
import { virtualListen, type MemberHeaders } from './virtual-listen.js'
import { memberEvents } from './virtual-trace.js'

/** What the virtual stage needs from the process. */
export interface VirtualDeps {
  readonly log: Logger
  readonly metrics: GatewayMetrics
  /** The edge cache, when `cache:` is configured: members' answers are cached as on their own endpoints. */
  readonly cache: EdgeCache | undefined
  /** The app's audit log and metrics: each member's policy decisions, as on its own endpoint. */
  readonly judging: JudgeDeps
  /** Each routed call counts against the member's limits (endpoint/limit.ts); none without limits. */
  readonly limiting: LimitDeps | undefined
  /** Whether `telemetry:` is on (policy events on the span, as on a member's endpoint). */
  readonly tracing: boolean
}

/** One request to a virtual server, as its handler sees it. */
interface VirtualRequest {
  readonly c: Context<GatewayEnv>
  readonly v: VirtualRuntime
  readonly deps: VirtualDeps
  /** The client's judged request (endpoint/call.ts); member requests are derived from it. */
  readonly call: EndpointCall
  readonly message: JsonRpcMessage
  readonly method: string
  readonly rawId: string
  /** The judged body text. */
  readonly text: string
  readonly principal: Principal | undefined
}

type VirtualHandler = (r: VirtualRequest) => Promise<Response>

/**
 * What a virtual server answers, by method (docs/virtual-servers.md). Discovery and lists fan out
 * to every member and merge; calls, reads, gets and completions are routed to one member by name
 * and streamed back untouched. Any other method is answered as a server that does not know it.
 * 2025-era methods (initialize, ping …) and subscriptions/listen are added here as rows.
 */
const HANDLERS: Readonly<Record<string, VirtualHandler>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, VirtualHandler>, {
    'server/discover': discover,
    'tools/list': list,
    'prompts/list': list,
    'resources/list': list,
    'resources/templates/list': list,
    'tools/call': (r: VirtualRequest) => callByName(r, 'tools', ['name']),
    'prompts/get': (r: VirtualRequest) => callByName(r, 'prompts', ['name']),
    'resources/read': readResource,
    'completion/complete': complete,
    'subscriptions/listen': (r: VirtualRequest) =>
      virtualListen({ ...r, log: r.deps.log, cache: r.deps.cache, headersFor: headersFor(r) }),
    'tasks/get': taskFollowUp,
    'tasks/result': taskFollowUp,
    'tasks/cancel': taskFollowUp,
    'tasks/update': taskFollowUp,
    'tasks/list': taskList,
  }),
)

/**
 * Last stage for /mcp/<virtual>, in place of policy, cache and proxy: the request has been judged
 * exactly as for a server (front door, authentication, strict parsing and header checks); every
 * member is then reached through its own path, under its own policy (docs/virtual-servers.md).
 */
export const virtualStage = (deps: VirtualDeps): MiddlewareHandler<GatewayEnv> => {
  return async function virtual(c) {
    const v = c.get('runtime').virtualServers.get(c.get('server').name) as VirtualRuntime
    // 2025-era clients: the gateway holds their session; what is left is a 2026-07-28 request.
    const legacy =
      c.get('mcp').era === 'legacy'
        ? await legacyFront(c, v, deps.log, {
            cache: deps.cache,
            headersFor: headersFor({ c, call: callOf(c), principal: c.get('principal') }),
          })
        : undefined
    if (legacy?.kind === 'answered') return legacy.response
    let mcp = c.get('mcp')
    if (mcp.kind === 'unknown' && mcp.era === 'modern') {
      // A body the front did not parse (some member has `trustHeaders: true`): a tools/call to
      // such a member is judged on its headers, as on that member's own endpoint; any other
      // request is parsed now, exactly as a front that parses every body would have.
      const call = trustedCall(c, v, deps, mcp)
      if (call !== undefined) return call
      mcp = classify(c.get('head'), c.get('body'), { ...v.front.classify, parseAlways: true })
      c.set('mcp', mcp)
    }
    const message = mcp.message
    // Notifications (cancelled, progress) name no member; accepted as any server accepts them.
    if (message === undefined || message.kind !== 'request' || message.rawId === undefined) {
      c.set('outcome', 'accepted')
      return c.body(null, 202)
    }
    const method = message.method as string
    // spec 2025-11-25 server/utilities/logging: `initialize` passes on the members' `logging`
    // capability, so a 2025-era client may set a level (the Inspector does so on connect). The
    // gateway relays members' log messages only within the answers they belong to, so the level
    // is accepted and nothing is forwarded: no member session is opened for it.
    if (legacy !== undefined && method === 'logging/setLevel') {
      c.set('outcome', 'ok')
      const body = `{"jsonrpc":"2.0","id":${message.rawId},"result":{}}`
      return c.body(body, 200, { 'content-type': 'application/json' })
    }
    const handler = HANDLERS[method]
    if (handler === undefined) {
      c.set('outcome', 'method_not_found')
      const body = `{"jsonrpc":"2.0","id":${message.rawId},"error":{"code":-32601,"message":"Method not found"}}`
      // As a server answers it (authorize.ts methodNotFound): 404 on 2026-07-28 (streamable-http
      // §Error Handling), in band for a 2025-era client, which takes a 404 for a lost session.
      const status = legacy === undefined ? 404 : 200
      return c.body(body, status, { 'content-type': 'application/json' })
    }
    const res = handler({
      c,
      v,
      deps,
      call: callOf(c),
      message,
      method,
      rawId: message.rawId,
      text: c.get('body').toString('utf8'),
      principal: c.get('principal'),
    })
    return legacy === undefined ? res : legacy.finish(await res)
  }
}

// ---------------------------------------------------------------------------------------------
// Reaching one member

/** Who a member request is made for. */
type Caller = Pick<VirtualRequest, 'c' | 'call' | 'principal'>

/**
 * The member request of a caller (endpoint/call.ts): the client's judged request with the
 * member's targets and body. `method` is the member request's own (a list read to route a call).
 */
function memberCall(
  r: Caller,
  body: Buffer,
  method: string,
  targets: readonly McpTarget[],
): EndpointCall {
  const mcp = r.call.mcp
  return { ...r.call, http: 'POST', body, mcp: { ...mcp, method, targets, kind: 'request' } }
}

/**
 * What the member gets beside the client's judged headers (endpoint/headers.ts): `Mcp-Method` /
 * `Mcp-Name` replaced when the member request is another method or a prefix came off the name.
 * SECURITY: a session id is the gateway's own (pipeline/virtual-legacy.ts), never a member's.
 */
function memberChanges(method: string | undefined, name: string | null | undefined): HeaderChanges {
  return { method, name, sessionId: null }
}

/** The member request headers of this caller, for the listen streams (pipeline/virtual-listen.ts). */
function headersFor(r: Caller): MemberHeaders {
  return async (member, _body, method) =>
    forwardHeaders(
      member.upstreamHeaders,
      r.call,
      await exchangeFor(r.c.get('runtime').auth, member.name, r.principal),
      propagationOf(r.call),
      memberChanges(method, null),
    )
}

/**
 * One member's answer to a read (discover, a list page), from the edge cache when it holds one,
 * else through the member's own path in its era (endpoint/era.ts), and stored as the member's
 * own endpoint would store it.
 */
async function askMember(
  r: VirtualRequest,
  member: ServerRuntime,
  method: string,
  text: string,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const body = Buffer.from(text, 'utf8')
  const cache = r.deps.cache
  const cached = cache === undefined ? undefined : memberCacheRequest(r, member, method, text, body)
  if (cache !== undefined && cached !== undefined) {
    const slot = cache.lookup(cached)
    if (slot !== undefined) {
      cache.event('hit')
      const p = cache.render(slot, r.rawId, method, undefined)
      const parsed: unknown = JSON.parse(Buffer.concat([p.head, p.body, p.tail]).toString('utf8'))
      if (isRecord(parsed)) return parsed
    }
  }
  const generation =
    cache === undefined || cached === undefined ? 0 : cache.generation(cached.server)
  const runtime = r.c.get('runtime')
  const call = memberCall(r, body, method, [])
  const answer = await askInEra(
    r.v.eras,
    r.v.name,
    member,
    {
      call,
      opts: {
        auth: await exchangeFor(runtime.auth, member.name, r.principal),
        // The cache key above is the client's request; the member gets the gateway's trace context.
        propagation: propagationOf(call),
        changes: memberChanges(method, null),
        maxInspectBytes: runtime.config.limits.maxInspectBytes,
        signal,
      },
    },
    eraCaller(r),
  )
  if (cache !== undefined && cached !== undefined && answer.status === 200) {
    cache.event('miss')
    cache.capture(cached, answer.message, generation)
  }
  return answer.message
}

/** The edge-cache request of a member read: the key its own endpoint would use for it. */
function memberCacheRequest(
  r: VirtualRequest,
  member: ServerRuntime,
  method: string,
  text: string,
  body: Buffer,
): CacheRequest | undefined {
  const parsed: unknown = JSON.parse(text)
  const params = isRecord(parsed) && isRecord(parsed.params) ? parsed.params : undefined
  const mcp: McpRequestInfo = {
    era: 'modern',
    version: r.c.get('mcp').version,
    method,
    kind: 'request',
    targets: [],
    verified: true,
    message: { kind: 'request', method, params, rawId: r.rawId },
  }
  const allowPrivate = r.deps.cache?.rules.allowPrivate ?? false
  return cacheRequestOf(member, mcp, body, r.principal, allowPrivate)?.req
}

/** The body of a list read the gateway sends a member on the client's behalf (to route a call). */
function readBody(r: VirtualRequest, method: string, cursor: string | undefined): string {
  const meta = r.message.params?._meta
  const params = {
    ...(cursor === undefined ? {} : { cursor }),
    ...(meta === undefined ? {} : { _meta: meta }),
  }
  return `{"jsonrpc":"2.0","id":${r.rawId},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`
}

// ---------------------------------------------------------------------------------------------
// Discovery and lists

async function discover(r: VirtualRequest): Promise<Response> {
  const { v } = r
  const cacheKey = mergedKey(r, 'server/discover', undefined, [])
  const hit = cachedAnswer(r, cacheKey)
  if (hit !== undefined) return hit
  const all = v.members.map((_, i) => i)
  const outcomes = await fanOut(all, v.config.fanOutTimeoutMs, (i, signal) =>
    askMember(r, v.members[i] as ServerRuntime, 'server/discover', r.text, signal),
  )
  memberEvents(r.c, 'server/discover', v.memberNames, outcomes)
  const results: (readonly [string, Record<string, unknown>])[] = []
  const missing: string[] = []
  outcomes.forEach((o, i) => {
    const name = v.memberNames[i] as string
    const result = o.ok && isRecord(o.value.result) ? o.value.result : undefined
    if (result === undefined) missing.push(name)
    else results.push([name, result])
  })
  const partial = reportPartial(r, 'server/discover', missing, outcomes)
  const hints = mergeHints(
    results.map(([, x]) => x),
    false,
    partial,
  )
  const result: Record<string, unknown> = {
    supportedVersions: VIRTUAL_VERSIONS,
    capabilities: mergeCapabilities(results.map(([, x]) => x)),
    serverInfo: GATEWAY_INFO,
    ...withInstructions(mergeInstructions(results)),
    resultType: 'complete',
    ttlMs: hints.ttlMs,
    cacheScope: hints.cacheScope,
  }
  if (!partial) storeMerged(r, cacheKey, result, hints.cacheScope)
  return answer(r, result, partial ? 'virtual_partial' : 'ok')
}

function withInstructions(text: string | undefined): { instructions?: string } {
  return text === undefined ? {} : { instructions: text }
}

async function list(r: VirtualRequest): Promise<Response> {
  const { v } = r
  const spec = LISTS[r.method] as ListSpec
  const cursor = r.message.params?.cursor
  let pending: PendingPages | undefined
  if (cursor !== undefined) {
    // SECURITY: only a cursor this gateway signed for this list opens (pagination §Error Handling).
    pending = typeof cursor === 'string' ? v.cursors.open(v.name, r.method, cursor) : undefined
    if (pending === undefined || pending.some(([m]) => m >= v.members.length))
      throw new GatewayError('invalid_params', 'invalid cursor')
  }
  const policy = r.c.get('runtime').policy
  // Each member's policy (on its own names), then its catalog view (docs/catalog.md §Curation).
  const filters = v.members.map((m) =>
    chainFilters(policy?.listFilter(r.principal, m.name), m.catalog),
  )
  const cacheKey = mergedKey(
    r,
    r.method,
    typeof cursor === 'string' ? cursor : undefined,
    filters.map((f) => f?.key ?? ''),
  )
  const hit = cachedAnswer(r, cacheKey)
  if (hit !== undefined) return hit
  const page = await fetchPage(r, spec, pending)
  // A first page of a list some member paginates: names are decided on the whole of it.
  const named = spec.kind === 'tools' || spec.kind === 'prompts'
  if (named && pending === undefined && page.next.length > 0 && !v.state.isFresh(spec.kind))
    await learnRest(r, spec, page.next, page.ttlMs)
  const pages: MemberPage[] = page.results.map(([member, result]) => {
    const f = filters[member]
    const view = f === undefined ? result : f.apply(r.method, result)
    return { member, items: itemsOf(spec, view) }
  })
  const merged = mergeItems(spec, pages, v.state, v.resourceRoute)
  reportNames(r, spec)
  if (merged.ambiguous.length > 0)
    r.deps.log.warn(
      { virtualServer: v.name, method: r.method, uris: merged.ambiguous.slice(0, 20) },
      'virtual server: URIs served by several members and routed by no resources: entry are left out',
    )
  const identityDependent = filters.some((f) => f?.identityDependent === true)
  const hints = mergeHints(
    page.results.map(([, x]) => x),
    identityDependent,
    page.partial,
  )
  const result: Record<string, unknown> = {
    [spec.key]: merged.items,
    ...(page.next.length === 0 ? {} : { nextCursor: v.cursors.seal(v.name, r.method, page.next) }),
    resultType: 'complete',
    ttlMs: hints.ttlMs,
    cacheScope: hints.cacheScope,
  }
  if (!page.partial) storeMerged(r, cacheKey, result, hints.cacheScope)
  return answer(r, result, page.partial ? 'virtual_partial' : 'ok')
}

/** One merged page: each member's result, which members have more, and whether any is missing. */
interface Page {
  readonly results: (readonly [number, Record<string, unknown>])[]
  readonly next: [number, string][]
  readonly partial: boolean
  /** The smallest ttl of the members' results. */
  readonly ttlMs: number
}

/**
 * Fetches one page of a list from every member (the first page) or from the members a cursor
 * names, in parallel, and records the names seen (virtual/state.ts). `readOf` builds the request
 * text for a member; the client's own body by default, with only its cursor replaced.
 */
async function fetchPage(
  r: VirtualRequest,
  spec: ListSpec,
  pending: PendingPages | undefined,
  method = r.method,
  bodyFor: (cursor: string | undefined) => string | undefined = (c) =>
    c === undefined ? r.text : replaceParam(r.text, ['cursor'], c),
): Promise<Page> {
  const { v } = r
  const asks: [number, string | undefined][] =
    pending === undefined
      ? v.members.map((_, i) => [i, undefined])
      : pending.map(([m, c]) => [m, c])
  const outcomes = await fanOut(
    asks.map((_, k) => k),
    v.config.fanOutTimeoutMs,
    (k, signal) => {
      const [m, memberCursor] = asks[k] as [number, string | undefined]
      const body = bodyFor(memberCursor)
      if (body === undefined) throw new GatewayError('invalid_params', 'invalid cursor')
      return askMember(r, v.members[m] as ServerRuntime, method, body, signal)
    },
  )
  memberEvents(
    r.c,
    method,
    asks.map(([m]) => v.memberNames[m] as string),
    outcomes,
  )
  const results: (readonly [number, Record<string, unknown>])[] = []
  const next: [number, string][] = []
  const missing: string[] = []
  const fresh = v.state.isFresh(spec.kind)
  outcomes.forEach((o, k) => {
    const [m] = asks[k] as [number, string | undefined]
    // A member without this list (-32601: it lacks the capability) contributes nothing, in full.
    if (o.ok && lacksMethod(o.value)) return
    const result = o.ok && isRecord(o.value.result) ? o.value.result : undefined
    if (result === undefined) {
      missing.push(v.memberNames[m] as string)
      return
    }
    results.push([m, result])
    // Names as the member's own endpoint shows them: curated (docs/catalog.md §Curation).
    const shown = memberListView(v.members[m] as ServerRuntime, method, result)
    const values = itemsOf(spec, shown).map((x) => x[spec.field] as string)
    // A first page restarts the member's names, unless the kind is known in full and the member
    // paginates: its later pages are not read again then, and their names must stay routable.
    const first = pending === undefined && !(fresh && typeof result.nextCursor === 'string')
    v.state.notePage(spec.kind, m, values, first)
    if (typeof result.nextCursor === 'string') next.push([m, result.nextCursor])
  })
  const partial = reportPartial(r, method, missing, outcomes)
  const ttlMs = mergeHints(
    results.map(([, x]) => x),
    false,
    false,
  ).ttlMs
  // Who serves what is known in full once every member's last page has been seen.
  if (pending === undefined && !partial && next.length === 0) v.state.markFresh(spec.kind, ttlMs)
  return { results, next, partial, ttlMs }
}

/** Logs and counts members left out of an answer; true when any was. */
function reportPartial(
  r: VirtualRequest,
  method: string,
  missing: readonly string[],
  outcomes: readonly { ok: boolean; error?: unknown; timedOut?: boolean }[],
): boolean {
  if (missing.length === 0) return false
  const why = outcomes
    .filter((o) => !o.ok)
    .map((o) => (o.timedOut === true ? 'timeout' : (toCode(o.error) ?? 'error')))
  r.deps.log.warn(
    { virtualServer: r.v.name, method, missing, why },
    'virtual server: members left out of a merged answer (partial; short ttl, not cached)',
  )
  r.deps.metrics.virtualPartial.inc({ server: r.v.name })
  return true
}

function lacksMethod(message: Readonly<Record<string, unknown>>): boolean {
  return isRecord(message.error) && message.error.code === -32601
}

function toCode(err: unknown): string | undefined {
  return err instanceof GatewayError ? err.code : err instanceof Error ? err.name : undefined
}

/** Collisions are logged once each (docs/virtual-servers.md §Names). */
function reportNames(r: VirtualRequest, spec: ListSpec): void {
  if (spec.kind !== 'tools' && spec.kind !== 'prompts') return
  const news = r.v.state.news(spec.kind)
  for (const c of news.collisions) {
    const log = c.outcome === 'unreachable' ? r.deps.log.error : r.deps.log.warn
    log.call(
      r.deps.log,
      {
        virtualServer: r.v.name,
        kind: spec.kind,
        name: c.name,
        members: c.members,
        outcome: c.outcome,
      },
      c.outcome === 'unreachable'
        ? 'virtual server: name collision under prefix: never; the name is unreachable'
        : 'virtual server: name collision; each is reachable by its prefixed name only',
    )
  }
}

// ---------------------------------------------------------------------------------------------
// Merged cache

/** The merged-answer key, or undefined when merged answers are not kept. */
function mergedKey(
  r: VirtualRequest,
  method: string,
  cursor: string | undefined,
  views: readonly string[],
): { readonly publicKey: string; readonly privateKey: string | undefined } | undefined {
  if (r.v.merged === undefined) return undefined
  const base = [method, cursor ?? '', ...views]
  const ctx = r.deps.cache?.rules.allowPrivate === true ? authContextOf(r.principal) : undefined
  return {
    publicKey: JSON.stringify(base),
    // SECURITY: a private merged answer is kept per authorization context (caching.mdx §cacheScope).
    privateKey: ctx === undefined ? undefined : JSON.stringify([...base, ctx]),
  }
}

function cachedAnswer(r: VirtualRequest, key: ReturnType<typeof mergedKey>): Response | undefined {
  const merged = r.v.merged
  if (merged === undefined || key === undefined) return undefined
  const result =
    merged.get(key.publicKey) ??
    (key.privateKey === undefined ? undefined : merged.get(key.privateKey))
  if (result === undefined) return undefined
  r.deps.cache?.event('hit')
  return answer(r, result, 'cache_hit')
}

function storeMerged(
  r: VirtualRequest,
  key: ReturnType<typeof mergedKey>,
  result: Readonly<Record<string, unknown>>,
  scope: 'public' | 'private',
): void {
  const merged = r.v.merged
  if (merged === undefined || key === undefined) return
  const k = scope === 'public' ? key.publicKey : key.privateKey
  if (k !== undefined) merged.set(k, result, result.ttlMs as number)
}

/** A merged answer, with the request's id exactly as the client wrote it. */
function answer(
  r: VirtualRequest,
  result: Readonly<Record<string, unknown>>,
  outcome: string,
): Response {
  r.c.set('outcome', outcome)
  const body = `{"jsonrpc":"2.0","id":${r.rawId},"result":${JSON.stringify(result)}}`
  return r.c.body(body, 200, { 'content-type': 'application/json' })
}

// ---------------------------------------------------------------------------------------------
// Routed calls

/** tools/call and prompts/get: the member that serves the exposed name, with its own name. */
async function callByName(
  r: VirtualRequest,
  kind: NamedKind,
  path: readonly string[],
): Promise<Response> {
  const exposed = valueAt(r.message.params, path)
  if (typeof exposed !== 'string')
    throw new GatewayError('invalid_params', `params.${path.join('.')} is required`)
  const targetKind = kind === 'tools' ? 'tool' : 'prompt'
  // A known name costs no await (a microtask turn per call on the hot path).
  const route = r.v.state.table(kind).routes.get(exposed) ?? (await routeName(r, kind, exposed))
  // An unknown name is answered as the server answers one (in band, no gateway marker).
  if (route === undefined)
    return denied(r, { kind: targetKind, name: exposed }, 'virtual_unknown_name')
  const member = r.v.members[route.member] as ServerRuntime
  // The prefix is off; the member's curation and pins are undone next, as on its own endpoint.
  const maxBytes = r.c.get('runtime').config.limits.maxInspectBytes
  const own =
    member.catalog === undefined
      ? route.name
      : await memberBackendName(member, kind, route.name, maxBytes)
  if (own === undefined)
    return denied(r, { kind: targetKind, name: exposed }, 'virtual_unknown_name')
  const target: McpTarget = { kind: targetKind, name: own }
  if (!allowed(r, member, target)) return denied(r, { kind: targetKind, name: exposed })
  let text = r.text
  if (own !== exposed) {
    // SECURITY: only this one value changes; the rest of the body is the client's, byte for byte.
    const rewritten = replaceParam(r.text, path, own)
    if (rewritten === undefined) throw new GatewayError('invalid_params', 'ambiguous params')
    text = rewritten
  }
  // Mcp-Name names the tool or prompt for tools/call and prompts/get (SEP-2243); not for completions.
  const name = r.method === 'completion/complete' ? undefined : own
  // Only a call that can create a task has its answer read for task ids (docs/virtual-servers.md
  // "Tasks"); a plain tools/call streams untouched.
  const tasks =
    r.method === 'tools/call' && mayCarryTaskIds(r.method, r.message, r.c.get('body'))
      ? r.v.tasks.sealerFor(member.name, r.principal)
      : undefined
  return limited(r, member, target, () => forwardTo(r, member, text, [target], name, tasks))
}

/** The message of a call judged on its headers: its body is forwarded, never read. */
const UNREAD_CALL: JsonRpcMessage = Object.freeze({
  kind: 'request',
  method: 'tools/call',
  params: undefined,
  rawId: undefined,
})

/**
 * A `tools/call` to a member that checks its body against its headers itself (`trustHeaders:
 * true`): judged, limited and forwarded on its `Mcp-Name` exactly as on that member's own endpoint
 * (docs/virtual-servers.md "What is judged"), without reading the body. Undefined when anything
 * needs the body (a prefix to take off, a curated name, a name not known yet, a member whose era
 * is not known or is 2025, a task to seal, trace context to add): the stage then parses it.
 */
function trustedCall(
  c: Context<GatewayEnv>,
  v: VirtualRuntime,
  deps: VirtualDeps,
  mcp: McpRequestInfo,
): Promise<Response> | undefined {
  const target = mcp.targets[0]
  if (mcp.method !== 'tools/call' || target?.kind !== 'tool' || c.get('trace') !== undefined)
    return undefined
  const route = v.state.table('tools').routes.get(target.name)
  if (route === undefined || route.name !== target.name) return undefined
  const member = v.members[route.member] as ServerRuntime
  // SECURITY: only for a member whose own endpoint trusts headers: it refuses a body that names
  // another tool than Mcp-Name (spec 2026-07-28 basic/transports/streamable-http §Server
  // Validation), so what it runs is the tool its policy allowed here.
  if (
    !member.config.trustHeaders ||
    member.catalog !== undefined ||
    v.eras.of(member.name) !== 'modern'
  )
    return undefined
  const body = c.get('body')
  if (mayCarryTaskIds('tools/call', undefined, body)) return undefined
  const r: VirtualRequest = {
    c,
    v,
    deps,
    call: callOf(c),
    message: UNREAD_CALL,
    method: 'tools/call',
    rawId: 'null', // never read on this path: a denial peeks the id, errors do (app.ts)
    text: '', // forwardTo: the client's body, unchanged
    principal: c.get('principal'),
  }
  if (!allowed(r, member, target))
    return Promise.resolve(denied({ ...r, rawId: peekRawId(body) ?? 'null' }, target))
  return limited(r, member, target, () => forwardTo(r, member, '', [target], undefined))
}

/**
 * Runs `send` inside the member's rate limits (endpoint/limit.ts), with the member and its own
 * target passed as they are on its own endpoint, so a limit on `weather`'s tools counts the same
 * calls whichever endpoint they come through (docs/rate-limits.md). A task follow-up names no
 * target, as on the member's own endpoint. Over a limit it throws 429 and nothing is forwarded.
 */
function limited(
  r: VirtualRequest,
  member: ServerRuntime,
  target: McpTarget | undefined,
  send: () => Promise<Response>,
): Promise<Response> {
  const limiting = r.deps.limiting
  // Without limits, no async frame of its own: a routed call is on the hot path.
  return limiting === undefined ? send() : limitedBy(limiting, r, member, target, send)
}

async function limitedBy(
  limiting: LimitDeps,
  r: VirtualRequest,
  member: ServerRuntime,
  target: McpTarget | undefined,
  send: () => Promise<Response>,
): Promise<Response> {
  const req = {
    principal: r.principal,
    peer: r.call.peer,
    headers: r.call.headers,
    method: r.method,
  }
  const verdict = await admit(limiting, req, member.name, target === undefined ? [] : [target])
  const out = r.c.env.outgoing
  for (const name in verdict.headers) out.setHeader(name, verdict.headers[name] as string)
  try {
    return await send()
  } finally {
    verdict.release?.()
  }
}

/** The member and own name of an exposed name; a list fetch when the map is not fresh. */
async function routeName(
  r: VirtualRequest,
  kind: NamedKind,
  exposed: string,
): Promise<{ member: number; name: string } | undefined> {
  const state = r.v.state
  const known = state.table(kind).routes.get(exposed)
  if (known !== undefined) return known
  if (state.isFresh(kind)) return undefined
  await refresh(r, kind === 'tools' ? 'tools/list' : 'prompts/list')
  return state.table(kind).routes.get(exposed)
}

/** Fetches every page of a list from every member (bounded) to learn who serves what. */
async function refresh(r: VirtualRequest, method: string): Promise<void> {
  const spec = LISTS[method] as ListSpec
  const page = await fetchPage(r, spec, undefined, method, (c) => readBody(r, method, c))
  reportNames(r, spec)
  if (page.next.length > 0 && !page.partial) await learnRest(r, spec, page.next, page.ttlMs)
}

/**
 * Reads the remaining pages of members that paginate, for their names only, so that the names of
 * a first page already account for every collision (an `onCollision` prefix never changes between
 * the pages of one listing). Bounded: MAX_REFRESH_PAGES rounds.
 */
async function learnRest(
  r: VirtualRequest,
  spec: ListSpec,
  next: PendingPages,
  ttlMs: number,
): Promise<void> {
  const method = Object.keys(LISTS).find((k) => LISTS[k] === spec) as string
  let pending = next
  let ttl = ttlMs
  for (let round = 0; round < MAX_REFRESH_PAGES; round++) {
    const page = await fetchPage(r, spec, pending, method, (c) => readBody(r, method, c))
    if (page.partial) return
    ttl = Math.min(ttl, page.ttlMs)
    if (page.next.length === 0) {
      r.v.state.markFresh(spec.kind, ttl)
      return
    }
    pending = page.next
  }
}
/** Pages per member a routing refresh reads at most. */
const MAX_REFRESH_PAGES = 10

async function readResource(r: VirtualRequest): Promise<Response> {
  const uri = r.message.params?.uri
  if (typeof uri !== 'string') throw new GatewayError('invalid_params', 'params.uri is required')
  const member = await routeUri(r, uri)
  if (member === undefined) return denied(r, { kind: 'resource', uri }, 'virtual_unknown_name')
  const target: McpTarget = { kind: 'resource', uri }
  if (!allowed(r, member, target)) return denied(r, target)
  return limited(r, member, target, () => forwardTo(r, member, r.text, [target], undefined))
}

/** completion/complete: a prompt by name (prefix off `ref.name`) or a resource template by URI. */
async function complete(r: VirtualRequest): Promise<Response> {
  const ref = r.message.params?.ref
  if (isRecord(ref) && ref.type === 'ref/prompt') return callByName(r, 'prompts', ['ref', 'name'])
  if (isRecord(ref) && ref.type === 'ref/resource' && typeof ref.uri === 'string') {
    const member = await routeUri(r, ref.uri)
    const target: McpTarget = { kind: 'resource', uri: ref.uri }
    if (member === undefined) return denied(r, target, 'virtual_unknown_name')
    if (!allowed(r, member, target)) return denied(r, target)
    return limited(r, member, target, () => forwardTo(r, member, r.text, [target], undefined))
  }
  throw new GatewayError('invalid_params', 'params.ref must be a ref/prompt or ref/resource')
}

/** The member serving a URI or template; refused when two serve it and `resources:` does not say. */
async function routeUri(r: VirtualRequest, uri: string): Promise<ServerRuntime | undefined> {
  const { v } = r
  // SECURITY: a URI with dot segments or encoded separators is refused as on a member's endpoint
  // with policies on (docs/policy.md §Resource URIs).
  if (r.c.get('runtime').policy !== undefined) {
    const problem = uriProblem(uri)
    if (problem !== undefined)
      throw new GatewayError('uri_not_normalized', `${JSON.stringify(uri)}: ${problem}`)
  }
  let route = routeResource(uri, v.state, v.resourceRoute)
  if (
    route.kind === 'unknown' &&
    !(v.state.isFresh('resources') && v.state.isFresh('resourceTemplates'))
  ) {
    await Promise.all([refresh(r, 'resources/list'), refresh(r, 'resources/templates/list')])
    route = routeResource(uri, v.state, v.resourceRoute)
  }
  if (route.kind === 'ambiguous') {
    const names = route.members.map((m) => v.memberNames[m]).join(', ')
    throw new GatewayError(
      'invalid_params',
      `${JSON.stringify(uri)} is served by ${names}; virtualServers.${v.name}.resources must route it`,
    )
  }
  return route.kind === 'member' ? v.members[route.member] : undefined
}

/**
 * The member's own policy decides (docs/virtual-servers.md §Policy): exactly what its endpoint
 * would allow, checked on its own name, audited under its own server name (endpoint/judge.ts).
 */
function allowed(r: VirtualRequest, member: ServerRuntime, target: McpTarget): boolean {
  const policy = r.c.get('runtime').policy
  if (policy === undefined) return true
  const allow = judge(policy, r.deps.judging, r.principal, member.name, r.method, target).allow
  if (allow && r.deps.tracing) r.call.trace?.event(EVENT.policy, { decision: 'allow' })
  return allow
}

/** What a server answers for a target it does not have (policy/denial.ts), in the exposed name. */
function denied(r: VirtualRequest, target: McpTarget, outcome = 'policy_denied'): Response {
  r.c.set('outcome', outcome)
  return r.c.body(renderDenial(target, r.rawId), 200, { 'content-type': 'application/json' })
}

/**
 * Streams the member's answer to the client through the member's own path, as its own endpoint's
 * proxy stage does (endpoint/plan.ts, or endpoint/era.ts for a 2025-only member): nothing is
 * buffered (progress and SSE pass as they come).
 */
async function forwardTo(
  r: VirtualRequest,
  member: ServerRuntime,
  text: string,
  targets: readonly McpTarget[],
  name: string | undefined,
  /** Seals the task ids of the answer for this member and caller (mcp/task-ids.ts). */
  tasks?: TaskIdSealer,
): Promise<Response> {
  const body = text === r.text ? r.c.get('body') : Buffer.from(text, 'utf8')
  const runtime = r.c.get('runtime')
  // No await (a microtask turn per call) unless the member exchanges tokens.
  const auth = exchanges(runtime.auth, member.name)
    ? await exchangeFor(runtime.auth, member.name, r.principal)
    : undefined
  // A member's era is learnt from its discovery before the first call is streamed to it.
  if (r.v.eras.of(member.name) === undefined) {
    const probe = readBody(r, 'server/discover', undefined)
    const signal = AbortSignal.timeout(r.v.config.fanOutTimeoutMs)
    await askMember(r, member, 'server/discover', probe, signal).catch(() => undefined)
  }
  const call = memberCall(r, body, r.method, targets)
  const opts = {
    auth,
    // The gateway's trace context in `params._meta` (docs/operations.md "Virtual servers").
    propagation: propagationOf(call),
    changes: memberChanges(undefined, name),
    maxInspectBytes: runtime.config.limits.maxInspectBytes,
    onAttempt: attemptEvents(call),
  }
  const res = r.c.env.outgoing
  if (r.v.eras.of(member.name) === 'legacy') {
    // A 2025-only member is answered within its session, streamed as it answers, its result given
    // `resultType` for a 2026-07-28 client (docs/virtual-servers.md "2025-only members").
    const { result, upstream } = await streamInEra(
      res,
      r.v.eras,
      member,
      { call, opts },
      eraCaller(r),
      tasks,
    )
    if (upstream !== undefined) r.c.set('upstreamId', upstream.id)
    r.c.set('outcome', result.kind === 'done' ? 'ok' : result.kind)
    return ALREADY_SENT
  }
  const planned = planAttempt(member, call, {
    ...opts,
    // A 2025-era client gets the result its era has, as from the member's own endpoint.
    rewriters: sessionOf(r.c) === undefined ? undefined : [legacyResult],
    // SECURITY: a member's task id reaches the client only sealed with its member.
    tasks: tasks ?? 'none',
    maxStreams: runtime.config.limits.maxStreamsPerPrincipal,
  })
  if (planned.kind === 'answer') return inBand(r, planned.outcome, planned.body)
  const plan = planned.plan
  try {
    const result = await sendWithRetries(res, member.balancing, plan)
    r.c.set('outcome', result.kind === 'done' ? 'ok' : result.kind)
    return ALREADY_SENT
  } finally {
    if (plan.upstream !== undefined) r.c.set('upstreamId', plan.upstream.id)
  }
}

const SEEN = { sse: false } as const

// ---------------------------------------------------------------------------------------------
// Tasks

/**
 * `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update`: to the member whose task it is,
 * named in the handle the virtual server gave (virtual/tasks.ts), with the member's own task id
 * in `params.taskId` and `Mcp-Name`, and the answer's ids sealed again. As on the member's own
 * endpoint, the check is ownership (docs/policy.md "Tasks"): the call that created the task was
 * judged by the member's policy; a handle this caller was not given is an unknown task, answered
 * in band, and nothing is forwarded.
 */
async function taskFollowUp(r: VirtualRequest): Promise<Response> {
  const { v } = r
  const task = openMemberTask(r.message, r.text, r.c.get('head').name, v.tasks, r.principal)
  // A member a reload took out of the virtual server no longer has tasks here.
  const index = task === undefined ? -1 : v.memberNames.indexOf(task.member)
  // SECURITY: a task id this caller was not given here is unknown; nothing is forwarded.
  if (task === undefined || index < 0)
    return inBand(r, 'task_not_found', unknownTaskAnswer(r.rawId))
  const member = v.members[index] as ServerRuntime
  const sealer = v.tasks.sealerFor(member.name, r.principal)
  return limited(r, member, undefined, () =>
    forwardTo(r, member, task.text, [], task.taskId, sealer),
  )
}

/**
 * `tasks/list` (2025-11-25). A member's list is not per caller, so with authentication on it is
 * answered empty here, as on a member's own endpoint (docs/balancing.md "Task ids"). Without
 * authentication every caller is one principal: the members' lists are read in parallel (as a
 * list fan-out, within `fanOutTimeoutMs`) and merged, each id sealed with its member, paginated
 * with the gateway's signed cursor.
 */
async function taskList(r: VirtualRequest): Promise<Response> {
  // SECURITY: a member's list would hand this caller other principals' tasks.
  if (r.principal !== undefined) return inBand(r, 'tasks_list_local', ownTasksListAnswer(r.rawId))
  const { v } = r
  const cursor = r.message.params?.cursor
  let asks: PendingPages = v.members.map((_, i) => [i, ''] as const)
  if (cursor !== undefined) {
    // SECURITY: only a cursor this gateway signed for this list opens (pagination §Error Handling).
    const pending =
      typeof cursor === 'string' ? v.cursors.open(v.name, r.method, cursor) : undefined
    if (pending === undefined || pending.some(([m]) => m >= v.members.length))
      throw new GatewayError('invalid_params', 'invalid cursor')
    asks = pending
  }
  const outcomes = await fanOut(
    asks.map((_, k) => k),
    v.config.fanOutTimeoutMs,
    (k, signal) => {
      const [m, memberCursor] = asks[k] as readonly [number, string]
      const body = cursor === undefined ? r.text : replaceParam(r.text, ['cursor'], memberCursor)
      if (body === undefined) throw new GatewayError('invalid_params', 'invalid cursor')
      const member = v.members[m] as ServerRuntime
      return askMember(r, member, 'tasks/list', body, signal)
    },
  )
  memberEvents(
    r.c,
    r.method,
    asks.map(([m]) => v.memberNames[m] as string),
    outcomes,
  )
  const tasks: unknown[] = []
  const next: [number, string][] = []
  const missing: string[] = []
  outcomes.forEach((o, k) => {
    const [m] = asks[k] as readonly [number, string]
    const name = v.memberNames[m] as string
    if (o.ok && lacksMethod(o.value)) return
    const result = o.ok ? sealedTasks(o.value, v.tasks.sealerFor(name, undefined)) : undefined
    if (result === undefined) {
      missing.push(name)
      return
    }
    tasks.push(...result.tasks)
    if (typeof result.nextCursor === 'string') next.push([m, result.nextCursor])
  })
  const partial = reportPartial(r, r.method, missing, outcomes)
  const result: Record<string, unknown> = {
    tasks,
    ...(next.length === 0 ? {} : { nextCursor: v.cursors.seal(v.name, r.method, next) }),
  }
  return answer(r, result, partial ? 'virtual_partial' : 'ok')
}

/**
 * A member's `tasks/list` result with every id sealed; undefined for an answer that is not one,
 * or one with an id too long to seal (that member is then left out, never relayed in the clear).
 */
function sealedTasks(
  message: Record<string, unknown>,
  sealer: TaskIdSealer,
): { readonly tasks: unknown[]; readonly nextCursor?: unknown } | undefined {
  if (!isRecord(message.result) || !Array.isArray(message.result.tasks)) return undefined
  try {
    const sealed = taskIdHook(sealer)(message, SEEN)?.result ?? message.result
    return isRecord(sealed) && Array.isArray(sealed.tasks)
      ? { tasks: sealed.tasks as unknown[], nextCursor: sealed.nextCursor }
      : undefined
  } catch {
    return undefined
  }
}

/** An answer the gateway gives in a member's name (a JSON-RPC body on HTTP 200). */
function inBand(r: VirtualRequest, outcome: string, text: string): Response {
  r.c.set('outcome', outcome)
  return r.c.body(text, 200, { 'content-type': 'application/json' })
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let cur = root
  for (const k of path) {
    if (!isRecord(cur)) return undefined
    cur = cur[k]
  }
  return cur
}

/** Whose member sessions a request to a 2025-only member uses (endpoint/era.ts). */
function eraCaller(r: Caller & Pick<VirtualRequest, 'deps'>): EraCaller {
  return {
    session: sessionOf(r.c),
    owner: callerKey(r.principal, r.call.peer),
    log: r.deps.log,
  }
}
