import type { CacheRequest } from '../cache/edge-cache.js'
import { cacheRequestOf } from '../cache/request.js'
import type { AuthRuntime } from '../auth/compile.js'
import type { Principal } from '../auth/principal.js'
import { attemptEvents, propagationOf, type EndpointCall } from '../endpoint/call.js'
import { askInEra, streamInEra } from '../client/era.js'
import { asLegacyPrompt } from '../endpoint/connect-answers.js'
import { exchangeFor } from '../endpoint/exchange.js'
import { forwardHeaders } from '../endpoint/headers.js'
import type { Admission, Admitted } from '../endpoint/admit.js'
import { endpointOf } from '../endpoint/endpoint.js'
import { outcomeOf, type Seen } from '../endpoint/send.js'
import type { McpRequestInfo, McpTarget } from '../mcp/classify.js'
import { isRecord, methodNotFoundBody } from '../mcp/jsonrpc.js'
import type { ListFilter } from '../mcp/list-filter.js'
import type { ParamDeclaration } from '../mcp/param-headers.js'
import type { TaskIdSealer } from '../mcp/task-ids.js'
import { legacyResult } from './envelope.js'
import { noteLimitHeaders } from './member-admission.js'
import {
  eraCaller,
  denied,
  inBand,
  json,
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
 * else through the member's own path in its era (client/era.ts), and stored as the member's
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
  const req = cacheRequestOf(member, mcp, body, r.principal, allowPrivate)?.req
  // Not a request to the member (no request of its own is counted): an answer the cache cannot
  // keep is counted under the virtual server's merged answer, not under the member.
  return req === undefined ? undefined : { ...req, name: undefined }
}

/**
 * Admits the client's request at `member`'s endpoint with the member's own target (endpoint/admit.ts:
 * method, names, URI form, scopes, policy, limits, audited under the member's name; a 403 names
 * this virtual endpoint), then runs `send`, holding the member's concurrency slots until it is
 * over. A denial is answered as the member answers a target it does not have, in the `exposed`
 * name the client used, and nothing is forwarded. A task follow-up names no target, as on the
 * member's own endpoint.
 */
export function admitted(
  r: VirtualRequest,
  member: MemberServer,
  target: McpTarget | undefined,
  exposed: McpTarget | undefined,
  send: (admission: Admitted) => Promise<Answer>,
): Promise<Answer> {
  const c = r.call
  const admission = endpointOf(r.deps.endpoints, member.name).admit(
    {
      http: 'POST',
      requestId: c.requestId,
      // The client's own request, in its era, with the member's target.
      mcp: {
        era: c.mcp.era,
        method: r.method,
        targets: target === undefined ? [] : [target],
        message: r.message,
      },
      principal: r.principal,
      peer: c.peer,
      headers: c.headers,
      trace: c.trace,
    },
    r.v.name,
  )
  // Decided synchronously (no limits): no async frame of its own on the routed call's hot path.
  return admission instanceof Promise
    ? admission.then((a) => proceed(r, a, exposed, send))
    : proceed(r, admission, exposed, send)
}

async function proceed(
  r: VirtualRequest,
  admission: Admission,
  exposed: McpTarget | undefined,
  send: (admission: Admitted) => Promise<Answer>,
): Promise<Answer> {
  if (admission.kind === 'refused') {
    if (admission.target === undefined || exposed === undefined) {
      r.out.outcome = admission.outcome
      return json(methodNotFoundBody(r.rawId), r.session === undefined ? 404 : 200)
    }
    return denied(r, exposed, admission.outcome)
  }
  if (admission.limitHeaders !== undefined) noteLimitHeaders(r.res, admission.limitHeaders)
  const release = admission.release
  if (release === undefined) return send(admission)
  try {
    return await send(admission)
  } finally {
    release()
  }
}

const LEGACY_RESULT = Object.freeze([legacyResult])

/** What a routed request needs beside its body and target. */
interface ForwardExtras {
  /** Seals the task ids of the answer for this member and caller (mcp/task-ids.ts). */
  readonly tasks?: TaskIdSealer | undefined
  /** The tool's parameter headers, for a 2025-era client's tools/call (virtual/state.ts). */
  readonly params?: readonly ParamDeclaration[] | undefined
  /**
   * What the answer is read through (the member's skills checks, URIs put under their exposed
   * names: virtual/handle-uris.ts); the whole answer is then read, bounded.
   */
  readonly listFilter?: ListFilter | undefined
}

const NO_EXTRAS: ForwardExtras = Object.freeze({})

/**
 * Streams the member's answer to the client through the member's own path, as its own endpoint's
 * proxy stage does (endpoint/plan.ts, or client/era.ts for a 2025-only member): nothing is
 * buffered (progress and SSE pass as they come), unless `extras.listFilter` must read it.
 */
export async function forwardTo(
  r: VirtualRequest,
  member: MemberServer,
  text: string,
  targets: readonly McpTarget[],
  name: string | undefined,
  extras: ForwardExtras = NO_EXTRAS,
): Promise<Answer> {
  const { tasks, params, listFilter } = extras
  const body = text === r.text ? r.call.body : Buffer.from(text, 'utf8')
  const runtime = r.ctx
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
      auth: await exchangeFor(runtime.auth, member.name, r.principal),
      propagation: propagationOf(call),
      changes: memberChanges(undefined, name),
      listFilter,
      maxInspectBytes: runtime.limits.maxInspectBytes,
      maxStreams: runtime.limits.maxStreamsPerPrincipal,
      onAttempt: attemptEvents(call),
    }
    const era = await streamInEra(res, r.v.eras, member, { call, opts }, eraCaller(r), tasks)
    if (era.upstream !== undefined) r.out.upstreamId = era.upstream.id
    r.out.outcome = outcomeOf(era.result)
    return SENT
  }
  const seen: Seen = { upstream: undefined }
  try {
    // The member's own send (endpoint/endpoint.ts): its credentials, plan and attempt loop. One
    // literal, no spread: this is the routed call's hot path.
    const sent = await endpointOf(r.deps.endpoints, member.name).send(
      call,
      res,
      {
        // The gateway's trace context in `params._meta` (docs/operations.md "Virtual servers").
        propagation: propagationOf(call),
        changes: memberChanges(undefined, name, params),
        // A 2025-era client gets the result its era has, as from the member's own endpoint.
        rewriters: r.session === undefined ? undefined : LEGACY_RESULT,
        // SECURITY: a member's task id reaches the client only sealed with its member.
        tasks: tasks ?? 'none',
        listFilter,
        maxInspectBytes: runtime.limits.maxInspectBytes,
        maxStreams: runtime.limits.maxStreamsPerPrincipal,
        onAttempt: attemptEvents(call),
      },
      seen,
    )
    if (sent.kind === 'answer') {
      // A 2025-era client has no input_required: the connect prompt becomes its -32042.
      if (r.session !== undefined) asLegacyPrompt(sent)
      return inBand(r, sent.outcome, sent.body)
    }
    r.out.outcome = outcomeOf(sent.result)
    return SENT
  } finally {
    if (seen.upstream !== undefined) r.out.upstreamId = seen.upstream.id
  }
}
