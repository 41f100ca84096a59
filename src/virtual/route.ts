import type { CacheRequest } from '../cache/edge-cache.js'
import { cacheRequestOf } from '../cache/request.js'
import type { AuthRuntime } from '../auth/compile.js'
import type { Principal } from '../auth/principal.js'
import { attemptEvents, propagationOf, type EndpointCall } from '../endpoint/call.js'
import { askInEra, streamInEra } from '../endpoint/era.js'
import { exchangeFor, exchanges } from '../endpoint/exchange.js'
import { forwardHeaders } from '../endpoint/headers.js'
import { admit, argumentsOf } from '../endpoint/judge.js'
import type { LimitDeps } from '../endpoint/limit.js'
import { planAttempt } from '../endpoint/plan.js'
import type { McpRequestInfo, McpTarget } from '../mcp/classify.js'
import { isRecord } from '../mcp/jsonrpc.js'
import type { TaskIdSealer } from '../mcp/task-ids.js'
import { EVENT } from '../telemetry/events.js'
import { sendWithRetries } from '../upstream/attempts.js'
import { legacyResult } from './envelope.js'
import { admitMember, noteLimitHeaders } from './member-limits.js'
import {
  eraCaller,
  inBand,
  memberCall,
  memberChanges,
  readBody,
  SENT,
  type Answer,
  type MemberHeaders,
  type MemberServer,
  type VirtualRequest,
} from './request.js'

/** The member request headers of this caller, for the listen streams (virtual/listen.ts). */
export function headersFor(
  call: EndpointCall,
  auth: AuthRuntime | undefined,
  principal: Principal | undefined,
): MemberHeaders {
  return async (member, _body, method) =>
    forwardHeaders(
      member.upstreamHeaders,
      call,
      await exchangeFor(auth, member.name, principal),
      propagationOf(call),
      memberChanges(method, null),
    )
}

/**
 * One member's answer to a read (discover, a list page), from the edge cache when it holds one,
 * else through the member's own path in its era (endpoint/era.ts), and stored as the member's
 * own endpoint would store it.
 */
export async function askMember(
  r: VirtualRequest,
  member: MemberServer,
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
  const runtime = r.ctx
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
        maxInspectBytes: runtime.limits.maxInspectBytes,
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
  member: MemberServer,
  method: string,
  text: string,
  body: Buffer,
): CacheRequest | undefined {
  const parsed: unknown = JSON.parse(text)
  const params = isRecord(parsed) && isRecord(parsed.params) ? parsed.params : undefined
  const mcp: McpRequestInfo = {
    era: 'modern',
    version: r.call.mcp.version,
    method,
    kind: 'request',
    targets: [],
    verified: true,
    message: { kind: 'request', method, params, rawId: r.rawId },
  }
  const allowPrivate = r.deps.cache?.rules.allowPrivate ?? false
  return cacheRequestOf(member, mcp, body, r.principal, allowPrivate)?.req
}

/**
 * Runs `send` inside the member's rate limits (endpoint/limit.ts), with the member and its own
 * target passed as they are on its own endpoint, so a limit on `weather`'s tools counts the same
 * calls whichever endpoint they come through (docs/rate-limits.md). A task follow-up names no
 * target, as on the member's own endpoint. Over a limit it throws 429 and nothing is forwarded.
 */
export function limited(
  r: VirtualRequest,
  member: MemberServer,
  target: McpTarget | undefined,
  send: () => Promise<Answer>,
): Promise<Answer> {
  const limiting = r.deps.limiting
  // Without limits, no async frame of its own: a routed call is on the hot path.
  return limiting === undefined ? send() : limitedBy(limiting, r, member, target, send)
}

async function limitedBy(
  limiting: LimitDeps,
  r: VirtualRequest,
  member: MemberServer,
  target: McpTarget | undefined,
  send: () => Promise<Answer>,
): Promise<Answer> {
  const targets = target === undefined ? [] : [target]
  const verdict = await admitMember(limiting, r, { member, method: r.method, targets })
  noteLimitHeaders(r.res, verdict.headers)
  try {
    return await send()
  } finally {
    verdict.release?.()
  }
}

/**
 * The member's own scopes and policy decide (docs/virtual-servers.md §Policy): exactly what its
 * endpoint would allow, checked on its own name, audited under its own server name; a target the
 * token has no scope for throws the 403 (endpoint/judge.ts admit).
 */
export function allowed(r: VirtualRequest, member: MemberServer, target: McpTarget): boolean {
  const policy = r.ctx.policy
  const deps = r.deps.judging
  if (policy === undefined && deps.scopes === undefined) return true
  const at = { endpoint: r.v.name, server: member.name, requestId: r.call.requestId }
  // The member's scopes, then its policy; a 403 names this virtual endpoint (endpoint/judge.ts).
  const allow = admit(policy, deps, r.principal, at, r.method, target, argumentsOf(r.message))
  if (allow && r.deps.tracing) r.call.trace?.event(EVENT.policy, { decision: 'allow' })
  return allow
}

const LEGACY_RESULT = Object.freeze([legacyResult])

/**
 * Streams the member's answer to the client through the member's own path, as its own endpoint's
 * proxy stage does (endpoint/plan.ts, or endpoint/era.ts for a 2025-only member): nothing is
 * buffered (progress and SSE pass as they come).
 */
export async function forwardTo(
  r: VirtualRequest,
  member: MemberServer,
  text: string,
  targets: readonly McpTarget[],
  name: string | undefined,
  /** Seals the task ids of the answer for this member and caller (mcp/task-ids.ts). */
  tasks?: TaskIdSealer,
): Promise<Answer> {
  const body = text === r.text ? r.call.body : Buffer.from(text, 'utf8')
  const runtime = r.ctx
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
  const res = r.res
  if (r.v.eras.of(member.name) === 'legacy') {
    // A 2025-only member is answered within its session, streamed as it answers, its result given
    // `resultType` for a 2026-07-28 client (docs/virtual-servers.md "2025-only members").
    const opts = {
      auth,
      propagation: propagationOf(call),
      changes: memberChanges(undefined, name),
      maxInspectBytes: runtime.limits.maxInspectBytes,
      maxStreams: runtime.limits.maxStreamsPerPrincipal,
      onAttempt: attemptEvents(call),
    }
    const era = await streamInEra(res, r.v.eras, member, { call, opts }, eraCaller(r), tasks)
    if (era.upstream !== undefined) r.out.upstreamId = era.upstream.id
    r.out.outcome = era.result.kind === 'done' ? 'ok' : era.result.kind
    return SENT
  }
  // One literal, no spread: this is the routed call's hot path.
  const planned = planAttempt(member, call, {
    auth,
    // The gateway's trace context in `params._meta` (docs/operations.md "Virtual servers").
    propagation: propagationOf(call),
    changes: memberChanges(undefined, name),
    // A 2025-era client gets the result its era has, as from the member's own endpoint.
    rewriters: r.session === undefined ? undefined : LEGACY_RESULT,
    // SECURITY: a member's task id reaches the client only sealed with its member.
    tasks: tasks ?? 'none',
    maxInspectBytes: runtime.limits.maxInspectBytes,
    maxStreams: runtime.limits.maxStreamsPerPrincipal,
    onAttempt: attemptEvents(call),
  })
  if (planned.kind === 'answer') return inBand(r, planned.outcome, planned.body)
  const plan = planned.plan
  try {
    const result = await sendWithRetries(res, member.balancing, plan)
    r.out.outcome = result.kind === 'done' ? 'ok' : result.kind
    return SENT
  } finally {
    if (plan.upstream !== undefined) r.out.upstreamId = plan.upstream.id
  }
}
