import type { ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import type { Principal } from '../auth/principal.js'
import {
  discoverCapabilities,
  rpcBody,
  type ListenFilter,
  type UpstreamEndpoint,
} from '../client/discover.js'
import type { EdgeCache } from '../cache/edge-cache.js'
import type { Invalidation } from '../mcp/changes.js'
import { ListenStream } from '../client/listen-stream.js'
import { callerKey, type EndpointCall } from '../endpoint/call.js'
import { askInEra, sessionFor, type EraCaller } from '../client/era.js'
import { memberSessionKey } from '../client/era-session.js'
import { exchangeFor } from '../endpoint/exchange.js'
import type { Endpoints } from '../endpoint/endpoint.js'
import type { MemberSession } from '../client/member-sessions.js'
import { getHeaders } from '../client/session-stream.js'
import { GatewayError } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { MODERN_VERSION } from '../mcp/protocol.js'
import { refuseTaskSubscriptions } from '../mcp/task-ids.js'
import { renderDenial } from '../policy/denial.js'
import type { StreamStop } from '../upstream/lifecycle.js'
import type { Upstream } from '../upstream/upstream.js'
import type { VirtualSession } from './client-session.js'
import { fanOut, fanOutDeadline } from './fan-out.js'
import { LegacyGetStream, SessionGone } from '../client/legacy-get-stream.js'
import { ListenMerge, memberFilter, memberTargets, type ListenMember } from './listen-merge.js'
import { leaseReplica, streamEndpoint, type MemberLease } from '../client/member-stream.js'
import { admitAll, MemberDenied, type AdmittedCaller, type MemberAsk } from './member-admission.js'
import {
  json,
  SENT,
  type Answer,
  type MemberHeaders,
  type MemberServer,
  type VirtualContext,
  type VirtualOutcome,
  type VirtualServer,
} from './request.js'
import { routeResource } from './resources.js'
import type { ListKind } from './state.js'

/** What the listen handler needs from the virtual stage. */
export interface ListenRequest {
  readonly v: VirtualServer
  readonly ctx: VirtualContext
  /** The client's judged request (endpoint/call.ts). */
  readonly call: EndpointCall
  /** Where the merged stream is written. */
  readonly res: ServerResponse
  readonly out: VirtualOutcome
  readonly message: JsonRpcMessage
  readonly rawId: string
  readonly principal: Principal | undefined
  readonly log: Logger
  readonly cache: EdgeCache | undefined
  /**
   * The member request headers of this caller (virtual/route.ts headersFor); without them
   * 2025-only members are not listened to.
   */
  readonly headersFor?: MemberHeaders | undefined
  /**
   * Every server's endpoint (endpoint/endpoint.ts): every capability read and stream the listen
   * opens is admitted by its member's, as on the member's own endpoint.
   */
  readonly endpoints: Endpoints
}

/**
 * `subscriptions/listen` on a virtual server (docs/virtual-servers.md "listen"): the members that
 * offer part of the filter are listened to, and their notifications merged into the client's one
 * stream (virtual/listen-merge.ts). The client's stream counts against its caller's stream budget
 * and each member stream against its replica's, as a direct listen does (docs/balancing.md
 * "Streams").
 */
export async function virtualListen(r: ListenRequest): Promise<Answer> {
  const { v } = r
  refuseTaskSubscriptions(r.message)
  const filter = listenFilterOf(r.message)
  const uris = filter.resourceSubscriptions ?? []
  // A URI goes to the member that serves it; a URI no member is known to serve is not honoured.
  const owners = new Map<string, number>()
  const watched = new Map<number, McpTarget[]>()
  for (const uri of uris) {
    const route = routeResource(uri, v.state, v.resourceRoute)
    if (route.kind !== 'member') continue
    owners.set(uri, route.member)
    const targets = watched.get(route.member) ?? []
    targets.push({ kind: 'resource', uri })
    watched.set(route.member, targets)
  }
  // SECURITY: each member that serves some of the URIs admits the listen it is asked for with
  // them, as its own endpoint admits a listen (endpoint/admit.ts: URI form, scopes, policy,
  // audit, limits), before any member is asked anything; one refusal refuses the whole listen
  // (docs/virtual-servers.md §Policy).
  const asks = [...watched].map(([m, targets]) => ({
    member: v.members[m] as MemberServer,
    method: 'subscriptions/listen',
    targets,
  }))
  let release: () => void
  try {
    release = await admitAll(listenCaller(r), asks)
  } catch (err) {
    if (!(err instanceof MemberDenied)) throw err
    r.out.outcome = 'policy_denied'
    const target = err.target ?? (asks[0]?.targets[0] as McpTarget)
    return json(renderDenial(target, r.rawId))
  }
  try {
    // Each member's capabilities, asked in parallel, within the fan-out deadline.
    const members = await listenMembers(r, undefined)
    return await merged(r, members, filter, (uri) => owners.get(uri), 'listen', undefined, watched)
  } finally {
    release()
  }
}

/**
 * The standalone GET stream of a 2025-era client (spec 2025-11-25 basic/transports §Listening for
 * Messages from the Server; docs/virtual-servers.md "2025-era clients"): the members' change
 * notifications of every kind some member offers, merged into one stream as for a listen. The
 * 2025 era has no filter: what the client gets is what `initialize` advertised (`listChanged`).
 * A virtual server none of whose members offers change notifications answers 405, as a 2025
 * server without a stream does. `resources/subscribe` is not offered (no `resources/updated`).
 */
export async function legacyListen(
  r: Omit<ListenRequest, 'message' | 'rawId'>,
  session: VirtualSession,
): Promise<Answer> {
  const members = await listenMembers(r, session)
  const all: ListenFilter = {
    toolsListChanged: true,
    promptsListChanged: true,
    resourcesListChanged: true,
  }
  const none = (): boolean => false
  const offered = members.some((m) => memberFilter(all, m.capabilities, none) !== undefined)
  // SH §Listening: "or else return HTTP 405 Method Not Allowed, indicating that the server does
  // not offer an SSE stream at this endpoint".
  if (!offered) throw new GatewayError('method_not_allowed')
  return merged({ ...r, rawId: '0' }, members, all, () => undefined, 'get', session.id)
}

/**
 * Ends the GET streams of a 2025-era session in this process (its DELETE, spec 2025-11-25
 * basic/transports §Session Management): the member sessions they listen in are ended too.
 */
export function endLegacyListens(v: VirtualServer, session: VirtualSession): void {
  v.listens.end(v.name, session.id)
}

/**
 * The client's one stream: the member streams it needs, admitted by the members' limits whole
 * or not at all (docs/virtual-servers.md "listen"), its caller's stream budget, then the merge
 * until it ends; the members' slots are held until then, across re-opened member streams.
 */
async function merged(
  r: Omit<ListenRequest, 'message'>,
  members: readonly ListenMember[],
  filter: ListenFilter,
  memberForUri: (uri: string) => number | undefined,
  mode: 'listen' | 'get',
  session?: string,
  /** The members whose listen was admitted already, with the URIs they watch (virtualListen). */
  admitted?: ReadonlyMap<number, unknown>,
): Promise<Answer> {
  const { v } = r
  const limits = r.ctx.limits
  const streams = memberTargets(members, filter, memberForUri)
  // SECURITY: each member stream is admitted by its member for as long as it is open (its limits
  // included), as a listen on the member's own endpoint is; refused, the listen opens nothing.
  const asks = streamAsks(v, streams).filter((a) => !admitted?.has(v.members.indexOf(a.member)))
  const release = await admitAll(listenCaller(r), asks)
  let stop: StreamStop | undefined
  let untrack: (() => void) | undefined
  const lifecycle = (v.members[0] as MemberServer).balancing.lifecycle
  try {
    stop = lifecycle.openStream(callerKey(r.principal, r.call.peer), limits.maxStreamsPerPrincipal)
    const merge = new ListenMerge(r.res, {
      members,
      filter,
      memberForUri,
      rawId: r.rawId,
      ackTimeoutMs: v.config.fanOutTimeoutMs,
      onChange: (member, what) => changed(r, member, what),
      log: r.log,
      stop,
      mode,
    })
    if (session !== undefined) untrack = v.listens.track(v.name, session, merge)
    merge.start()
    await merge.done
    r.out.outcome = 'ok'
    return SENT
  } finally {
    untrack?.()
    if (stop !== undefined) lifecycle.closeStream(stop)
    release()
  }
}

/** The caller of a listen, as its member requests are admitted for it. */
function listenCaller(r: Omit<ListenRequest, 'message' | 'rawId'>): AdmittedCaller {
  return {
    principal: r.principal,
    call: r.call,
    res: r.res,
    endpoints: r.endpoints,
    endpoint: r.v.name,
  }
}

/**
 * The member requests of a listen's streams: each member asked for something, with the method
 * and targets a listen on its own endpoint has (the URIs it is asked to watch). A 2025-only
 * member's GET stream is its listen stream, and counts as one.
 */
function streamAsks(v: VirtualServer, streams: readonly (ListenFilter | undefined)[]): MemberAsk[] {
  const asks: MemberAsk[] = []
  streams.forEach((f, i) => {
    if (f === undefined) return
    const targets = (f.resourceSubscriptions ?? []).map(
      (uri) => ({ kind: 'resource', uri }) as const,
    )
    asks.push({ member: v.members[i] as MemberServer, method: 'subscriptions/listen', targets })
  })
  return asks
}

/**
 * Every member as a listen needs it, asked in parallel within `fanOutTimeoutMs`: a 2026-07-28
 * member's capabilities from its `server/discover` and a `subscriptions/listen` stream; a
 * 2025-only member's from the session the gateway holds with it for this caller, and its GET
 * stream (legacyListenMember below). A member whose era is not known yet is
 * asked once in its own era first. A member that does not answer in time is asked for nothing.
 */
async function listenMembers(
  r: Omit<ListenRequest, 'message' | 'rawId'>,
  session: VirtualSession | undefined,
): Promise<ListenMember[]> {
  const { v } = r
  const caller = {
    session,
    owner: callerKey(r.principal, r.call.peer),
    log: r.log,
    principal: r.principal,
    maxBytes: r.ctx.limits.maxInspectBytes,
  }
  // The capability read of every member counts as its discovery (all or nothing, as the streams).
  const discoveries = v.members.map((member) => ({
    member,
    method: 'server/discover',
    targets: [],
  }))
  const release = await admitAll(listenCaller(r), discoveries)
  const deadline = fanOutDeadline(v.config.fanOutTimeoutMs)
  const outcomes = await fanOut(
    v.members.map((_, i) => i),
    deadline,
    async (i, signal): Promise<ListenMember> => {
      const m = v.members[i] as MemberServer
      const headersFor = r.headersFor
      if (headersFor !== undefined && v.eras.of(m.name) === undefined)
        await learnEra(r, m, caller, signal).catch(() => undefined)
      if (v.eras.of(m.name) === 'legacy') {
        if (headersFor === undefined) throw new Error('2025-only member: not listened to')
        const headers = await headersFor(m, EMPTY, 'initialize')
        return legacyListenMember(r, m, headers, caller)
      }
      const capabilities = await discoverCapabilities(endpointOf(m), signal)
      return { name: m.name, capabilities, acquire: () => lease(m) }
    },
  ).finally(release)
  return v.members.map((m, i) => {
    const o = outcomes[i]
    return o?.ok === true ? o.value : { name: m.name, capabilities: {}, acquire: () => lease(m) }
  })
}

const EMPTY = Buffer.alloc(0)
const DISCOVER_ID = 'mcp-edge-discover'
const REPLACED: ReadonlySet<string> = new Set([
  'mcp-protocol-version',
  'content-type',
  'accept',
  'last-event-id',
])

/**
 * A POST the gateway makes to a member for this caller (a discovery, a 2025-era `initialize`):
 * the caller's judged headers, but the version and media types of a POST, whatever the caller's
 * own request was (a 2025-era GET has neither).
 */
function postCall(client: EndpointCall, method: string, body: Buffer, rawId: string): EndpointCall {
  const forward: string[] = []
  const own = client.head.forward
  for (let i = 0; i < own.length; i += 2) {
    if (!REPLACED.has((own[i] as string).toLowerCase()))
      forward.push(own[i] as string, own[i + 1] as string)
  }
  forward.push(
    'mcp-protocol-version',
    MODERN_VERSION,
    'content-type',
    'application/json',
    'accept',
    'application/json, text/event-stream',
  )
  return {
    ...client,
    http: 'POST',
    body,
    head: { ...client.head, forward },
    mcp: {
      ...client.mcp,
      era: 'modern',
      method,
      kind: 'request',
      targets: [],
      message: { kind: 'request', method, params: undefined, rawId },
    },
  }
}

/** One `server/discover` in the member's own era (client/era.ts): its era is learnt. */
async function learnEra(
  r: Omit<ListenRequest, 'message' | 'rawId'>,
  m: MemberServer,
  caller: EraCaller & { readonly maxBytes: number },
  signal: AbortSignal,
): Promise<void> {
  const body = Buffer.from(rpcBody(DISCOVER_ID, 'server/discover'), 'utf8')
  const call = postCall(r.call, 'server/discover', body, JSON.stringify(DISCOVER_ID))
  const runtime = r.ctx
  await askInEra(
    r.v.eras,
    r.v.name,
    m,
    {
      call,
      opts: {
        auth: await exchangeFor(runtime.auth, m.name, r.principal),
        changes: { method: 'server/discover', name: null, sessionId: null },
        maxInspectBytes: caller.maxBytes,
        signal,
      },
    },
    caller,
  )
}

/** A member's change: the merged lists, the name map and the member's cache entries are stale. */
function changed(r: Pick<ListenRequest, 'v' | 'cache'>, member: string, what: Invalidation): void {
  // A skill changed is told as resources/list_changed (skills.mdx defines no notification).
  const kinds: ListKind[] =
    what.kind === 'tools' || what.kind === 'prompts'
      ? [what.kind]
      : what.kind === 'resources'
        ? ['resources', 'resourceTemplates', 'skills']
        : []
  for (const k of kinds) r.v.state.invalidate(k)
  if (what.kind !== 'resource') r.v.merged?.clear()
  r.cache?.invalidate(member, what)
}

/** The filter of a listen request (spec 2026-07-28 basic/patterns/subscriptions). */
function listenFilterOf(message: JsonRpcMessage): ListenFilter {
  const n = message.params?.notifications
  if (!isRecord(n)) throw new GatewayError('invalid_params', 'params.notifications is required')
  const uris = n.resourceSubscriptions
  if (uris !== undefined && (!Array.isArray(uris) || uris.some((u) => typeof u !== 'string')))
    throw new GatewayError('invalid_params', 'resourceSubscriptions must be a list of URIs')
  return {
    ...(n.toolsListChanged === true && { toolsListChanged: true }),
    ...(n.promptsListChanged === true && { promptsListChanged: true }),
    ...(n.resourcesListChanged === true && { resourcesListChanged: true }),
    ...(uris !== undefined && { resourceSubscriptions: uris as string[] }),
  }
}

/** Where the gateway itself asks a member what it offers: an available replica, configured headers. */
function endpointOf(m: MemberServer): UpstreamEndpoint {
  const ups = m.balancing.pool.upstreams
  const up = ups.find((u) => u.available) ?? ups[0]
  if (up === undefined) throw new GatewayError('no_upstream')
  return streamEndpoint(m, up)
}

/** A 2026-07-28 member's listen stream on a leased replica (client/member-stream.ts). */
function lease(m: MemberServer): MemberLease {
  const { up, release } = leaseReplica(m)
  const ep = streamEndpoint(m, up)
  return {
    open: (filter, id, onChange) => new ListenStream(ep, filter, id, onChange),
    release,
  }
}

/** What a 2025-only member is asked to notify about: no `resources/subscribe` is sent to it. */
function withoutSubscribe(caps: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const { resources, ...rest } = caps
  if (!isRecord(resources)) return rest
  const { subscribe: _s, ...kept } = resources
  return { ...rest, resources: kept }
}

/**
 * A 2025-only member as one stream of a merged listen (virtual/listen-merge.ts): its standalone
 * GET stream (spec 2025-11-25 basic/transports §Listening for Messages from the Server), opened in
 * the member session the caller's calls use, on the replica that holds it, counted against that
 * replica's `maxStreams`. The caller's own session, not one the gateway shares between callers:
 * a 2025-era server addresses notifications to a session, and may well tell only the session
 * whose tools changed (the official SDK keeps one server instance per session). `headers` are
 * the member request headers of the caller (virtual/route.ts headersFor); the member
 * session is initialised first when this process has none. A member that answers 404 for the
 * session gets a new one on the next attempt.
 */
async function legacyListenMember(
  r: Omit<ListenRequest, 'message' | 'rawId'>,
  member: MemberServer,
  headers: readonly string[],
  caller: EraCaller & { readonly principal: Principal | undefined; readonly maxBytes: number },
): Promise<ListenMember> {
  const v = r.v
  const key = memberSessionKey(caller.session, caller.owner)
  const runtime = r.ctx
  const req = {
    call: postCall(r.call, 'initialize', EMPTY, '""'),
    opts: {
      auth: await exchangeFor(runtime.auth, member.name, r.principal),
      changes: { name: null, sessionId: null },
      maxInspectBytes: caller.maxBytes,
    },
  }
  const session = (): Promise<MemberSession> => sessionFor(v.eras, member, req, caller)
  const first = await session()
  return {
    name: member.name,
    capabilities: withoutSubscribe(first.capabilities ?? {}),
    acquire: async () => {
      const s = await session()
      const pinned = s.pin as Upstream | undefined
      if (pinned?.health.down === true) {
        await v.eras.sessions.forget(key, member.name, s)
        throw new GatewayError('session_not_found', 'the session is no longer available')
      }
      const { up, release } = leaseReplica(member, pinned)
      return {
        open: (filter, _id, onChange) => {
          const ep = streamEndpoint(member, up, getHeaders(headers, s))
          const stream = new LegacyGetStream(v.eras.streams, s, ep, filter, onChange)
          void stream.ended.then((err) =>
            err instanceof SessionGone ? v.eras.sessions.forget(key, member.name, s) : undefined,
          )
          return stream
        },
        release,
      }
    },
  }
}
