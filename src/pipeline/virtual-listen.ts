import type { Context } from 'hono'
import type { Logger } from 'pino'
import type { Principal } from '../auth/principal.js'
import {
  discoverCapabilities,
  type ListenFilter,
  type UpstreamEndpoint,
} from '../cache/discover.js'
import type { EdgeCache } from '../cache/edge-cache.js'
import type { Invalidation } from '../cache/key.js'
import type { GatewayEnv } from '../env.js'
import { GatewayError } from '../errors.js'
import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { refuseTaskSubscriptions } from '../mcp/task-ids.js'
import { renderDenial } from '../policy/denial.js'
import type { ServerRuntime, VirtualRuntime } from '../runtime/runtime.js'
import { fanOut } from '../virtual/fan-out.js'
import { ListenMerge, type ListenMember } from '../virtual/listen-merge.js'
import { routeResource } from '../virtual/resources.js'
import type { NamedKind, UriKind } from '../virtual/state.js'
import { ALREADY_SENT } from './node-response.js'

/** What the listen handler needs from the virtual stage. */
export interface ListenRequest {
  readonly c: Context<GatewayEnv>
  readonly v: VirtualRuntime
  readonly message: JsonRpcMessage
  readonly rawId: string
  readonly principal: Principal | undefined
  readonly log: Logger
  readonly cache: EdgeCache | undefined
}

/**
 * `subscriptions/listen` on a virtual server (docs/virtual-servers.md "listen"): the members that
 * offer part of the filter are listened to, and their notifications merged into the client's one
 * stream (virtual/listen-merge.ts). The client's stream counts against its caller's stream budget
 * and each member stream against its replica's, as a direct listen does (docs/balancing.md
 * "Streams").
 */
export async function virtualListen(r: ListenRequest): Promise<Response> {
  const { c, v } = r
  refuseTaskSubscriptions(r.message)
  const filter = listenFilterOf(r.message)
  const uris = filter.resourceSubscriptions ?? []
  // Each member's capabilities, asked in parallel (server/discover), within the fan-out deadline.
  const caps = await fanOut(
    v.members.map((_, i) => i),
    v.config.fanOutTimeoutMs,
    (i, signal) => discoverCapabilities(endpointOf(v.members[i] as ServerRuntime), signal),
  )
  const policy = c.get('runtime').policy
  // A URI goes to the member that serves it. One its member's policy denies the caller refuses the
  // whole listen, as on the member's own endpoint (docs/virtual-servers.md §Policy), before any
  // member stream is opened; a URI no member is known to serve is not honoured.
  const owners = new Map<string, number>()
  for (const uri of uris) {
    const route = routeResource(uri, v.state, v.resourceRoute)
    if (route.kind !== 'member') continue
    const member = v.members[route.member] as ServerRuntime
    const target = { kind: 'resource', uri } as const
    if (policy !== undefined && !policy.check(r.principal, member.name, target).allow) {
      c.set('outcome', 'policy_denied')
      return c.body(renderDenial(target, r.rawId), 200, { 'content-type': 'application/json' })
    }
    owners.set(uri, route.member)
  }
  const members: ListenMember[] = v.members.map((m, i) => {
    const o = caps[i]
    return {
      name: m.name,
      capabilities: o?.ok === true ? o.value : {},
      acquire: () => lease(m),
    }
  })
  const limits = c.get('runtime').config.limits
  const lifecycle = (v.members[0] as ServerRuntime).balancing.lifecycle
  const stop = lifecycle.openStream(
    streamOwner(r.principal, c.env.incoming.socket.remoteAddress),
    limits.maxStreamsPerPrincipal,
  )
  try {
    const merge = new ListenMerge(c.env.outgoing, {
      members,
      filter,
      memberForUri: (uri) => owners.get(uri),
      rawId: r.rawId,
      ackTimeoutMs: v.config.fanOutTimeoutMs,
      onChange: (member, what) => changed(r, member, what),
      log: r.log,
      stop,
    })
    merge.start()
    await merge.done
    c.set('outcome', 'ok')
    return ALREADY_SENT
  } finally {
    lifecycle.closeStream(stop)
  }
}

/** A member's change: the merged lists, the name map and the member's cache entries are stale. */
function changed(r: ListenRequest, member: string, what: Invalidation): void {
  const kinds: (NamedKind | UriKind)[] =
    what.kind === 'tools' || what.kind === 'prompts'
      ? [what.kind]
      : what.kind === 'resources'
        ? ['resources', 'resourceTemplates']
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

/** Where the gateway itself reaches a member: one of its replicas, with its configured headers. */
function endpointOf(m: ServerRuntime): UpstreamEndpoint {
  const up = m.balancing.pool.upstreams.find((u) => u.available) ?? m.balancing.pool.upstreams[0]
  return {
    url: up?.url.href ?? '',
    headers: m.upstreamHeaders,
    dispatcher: up?.dispatcher as UpstreamEndpoint['dispatcher'],
    headersTimeoutMs: m.config.timeouts.responseHeadersMs,
    bodyTimeoutMs: m.config.timeouts.streamIdleMs,
  }
}

/**
 * A replica for one member stream, counted against its `maxStreams` until released; throws
 * `streams_at_capacity` / `no_upstream` as a direct listen would (upstream/pool.ts).
 */
function lease(m: ServerRuntime): { ep: UpstreamEndpoint; release(): void } {
  const up = m.balancing.pool.select(undefined, undefined, true)
  up.inFlight++
  up.streams++
  let released = false
  return {
    ep: {
      url: up.url.href,
      headers: m.upstreamHeaders,
      dispatcher: up.dispatcher,
      headersTimeoutMs: m.config.timeouts.responseHeadersMs,
      bodyTimeoutMs: m.config.timeouts.streamIdleMs,
    },
    release: () => {
      if (released) return
      released = true
      up.inFlight--
      up.streams--
    },
  }
}

/** Who a stream counts against, as in pipeline/proxy.ts: verified issuer and subject, else the peer. */
function streamOwner(p: Principal | undefined, remoteAddress: string | undefined): string {
  return p === undefined
    ? `addr ${remoteAddress ?? ''}`
    : `sub ${p.issuer.length}:${p.issuer}${p.subject}`
}
