import type { ServerResponse } from 'node:http'
import type { Principal } from '../auth/principal.js'
import type { Admitted } from '../endpoint/admit.js'
import type { EndpointCall } from '../endpoint/call.js'
import { endpointOf, type Endpoints } from '../endpoint/endpoint.js'
import { GatewayError } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import type { MemberServer, VirtualRequest } from './request.js'

/**
 * Who a member request is admitted for (docs/rate-limits.md §Keys): the client's caller, its
 * connection's peer and headers and its request id, whichever member request the gateway makes
 * for it; `res` is the client's answer, which carries the RateLimit fields of the decisions;
 * `endpoint` is the virtual server the client called, which a 403 challenge names.
 */
export interface AdmittedCaller {
  readonly principal: Principal | undefined
  readonly call: Pick<EndpointCall, 'peer' | 'headers' | 'requestId' | 'trace' | 'mcp'>
  readonly res: ServerResponse
  readonly endpoints: Endpoints
  readonly endpoint: string
}

/** One member request a caller's request causes: the member, its method and its own targets. */
export interface MemberAsk {
  readonly member: MemberServer
  readonly method: string
  readonly targets: readonly McpTarget[]
}

/**
 * One member request of `caller`, admitted at the member's endpoint (endpoint/admit.ts) exactly
 * as a request with that method and those targets is on the member's own endpoint: a 400, a 403
 * and a 429 are thrown; a denial is thrown as `denied` with the target, for the caller to answer.
 * A request the gateway makes on the client's behalf (discovery, list pages, listen streams) is
 * a 2026-07-28 request whatever the client's era (the gateway speaks it to its members; 2025-only
 * members are reached through client/era.ts).
 */
function admitMember(caller: AdmittedCaller, ask: MemberAsk): Admitted | Promise<Admitted> {
  const c = caller.call
  const admission = endpointOf(caller.endpoints, ask.member.name).admit(
    {
      http: 'POST',
      requestId: c.requestId,
      mcp: { era: 'modern', method: ask.method, targets: ask.targets, message: c.mcp.message },
      principal: caller.principal,
      peer: c.peer,
      headers: c.headers,
      trace: c.trace,
    },
    caller.endpoint,
  )
  return admission instanceof Promise ? admission.then(admittedOrThrow) : admittedOrThrow(admission)
}

/** A denied target of a member request, thrown so an all-or-nothing admission can give back. */
export class MemberDenied extends Error {
  constructor(readonly target: McpTarget | undefined) {
    super("denied by the member's policy")
  }
}

function admittedOrThrow(
  a: Admitted | { kind: 'refused'; target: McpTarget | undefined },
): Admitted {
  if (a.kind === 'refused') throw new MemberDenied(a.target)
  return a
}

/** The caller of a virtual request, as its member requests are admitted for it. */
function callerOf(r: VirtualRequest): AdmittedCaller {
  return {
    principal: r.principal,
    call: r.call,
    res: r.res,
    endpoints: r.deps.endpoints,
    endpoint: r.v.name,
  }
}

/** A member request's admission: admitted, or why not (a GatewayError, or a MemberDenied). */
type Decided = Admitted | Error

/**
 * The admissions of one fan-out round's member requests: the admitted ones hold their
 * concurrency slots until `release()`; a refused member is left out of the round with its
 * refusal (docs/virtual-servers.md "Rate limits").
 */
export class Admissions {
  constructor(
    private readonly refusals: ReadonlyMap<number, Error>,
    private readonly admitted: readonly Admitted[],
  ) {}

  /** Why member `m`'s request was refused; undefined when it was admitted. */
  refusal(m: number): Error | undefined {
    return this.refusals.get(m)
  }

  /** Whether some member was refused (a merged answer then is partial, never a cache hit). */
  get someRefused(): boolean {
    return this.refusals.size > 0
  }

  /** The refusal to answer with when every member's request was refused (none was admitted). */
  get allRefused(): Error | undefined {
    if (this.admitted.length > 0) return undefined
    for (const refusal of this.refusals.values()) return refusal
    return undefined
  }

  /** Gives back every slot taken (exactly once each: LimitVerdict.release). */
  release(): void {
    for (const a of this.admitted) a.release?.()
  }
}

/**
 * Admits the member requests of one fan-out round of `r`'s caller, each at its member's
 * endpoint (docs/virtual-servers.md "Rate limits"): `members` are indexes into the virtual
 * server's members, each asked `method` with no target, as a list read or a discovery is on the
 * member's own endpoint. Without limits nothing is awaited.
 */
export function admitMembers(
  r: VirtualRequest,
  members: readonly number[],
  method: string,
): Admissions | Promise<Admissions> {
  const asks = members.map((m) => ({ member: r.v.members[m] as MemberServer, method, targets: [] }))
  const round = (decided: readonly Decided[]): Admissions => {
    const refusals = new Map<number, Error>()
    const admitted: Admitted[] = []
    decided.forEach((d, k) => {
      if (d instanceof Error) refusals.set(members[k] as number, d)
      else admitted.push(d)
    })
    return new Admissions(refusals, admitted)
  }
  const decided = decideEach(callerOf(r), asks)
  return decided instanceof Promise ? decided.then(round) : round(decided)
}

/**
 * Admits every member request at once, whole or not at all: when any is refused, the slots
 * already taken are given back and that refusal (a 429, a 403, a MemberDenied) is thrown, so
 * nothing is held on the other members either (docs/virtual-servers.md "listen"). Resolves with
 * the release of every slot taken, to be called once the requests and streams are over.
 */
export async function admitAll(
  caller: AdmittedCaller,
  asks: readonly MemberAsk[],
): Promise<() => void> {
  if (asks.length === 0) return NO_RELEASE
  const decided = await decideEach(caller, asks)
  const admitted = decided.filter((d): d is Admitted => !(d instanceof Error))
  const release = (): void => {
    for (const a of admitted) a.release?.()
  }
  const refused = decided.find((d): d is Error => d instanceof Error)
  if (refused === undefined) return release
  // SECURITY: all or nothing; a refused listen holds no stream on any member.
  release()
  throw refused
}

const NO_RELEASE = (): void => undefined

/**
 * Each member request admitted at its member's endpoint, in parallel: admitted, or the refusal
 * admission threw (a GatewayError, a MemberDenied). The RateLimit fields of every decision go
 * on the caller's answer. Decided synchronously when every admission was (no limits).
 */
function decideEach(
  caller: AdmittedCaller,
  asks: readonly MemberAsk[],
): Decided[] | Promise<Decided[]> {
  const pending: (Admitted | Promise<Admitted>)[] = []
  const settled: PromiseSettledResult<Admitted>[] = []
  for (const a of asks) {
    try {
      pending.push(admitMember(caller, a))
    } catch (err) {
      pending.push(Promise.reject(err as Error))
    }
  }
  if (!pending.some((p) => p instanceof Promise)) {
    for (const p of pending) settled.push({ status: 'fulfilled', value: p as Admitted })
    return settle(caller, settled)
  }
  return Promise.allSettled(pending).then((s) => settle(caller, s))
}

function settle(
  caller: AdmittedCaller,
  settled: readonly PromiseSettledResult<Admitted>[],
): Decided[] {
  const out: Decided[] = []
  let failure: unknown
  for (const s of settled) {
    if (s.status === 'fulfilled') {
      noteLimitHeaders(caller.res, s.value.limitHeaders ?? NO_HEADERS)
      out.push(s.value)
    } else if (s.reason instanceof GatewayError || s.reason instanceof MemberDenied) {
      // Admission throws nothing else: a refusal (400, 403, 429, a denied target).
      if (s.reason instanceof GatewayError && s.reason.code.startsWith('rate_limit'))
        noteLimitHeaders(caller.res, s.reason.headers ?? NO_HEADERS)
      out.push(s.reason)
    } else failure ??= s.reason
  }
  if (failure !== undefined) {
    for (const d of out) if (!(d instanceof Error)) d.release?.()
    throw failure
  }
  return out
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

/** The structured-field lists of draft-ietf-httpapi-ratelimit-headers, one item per limit. */
const ITEM_LISTS: ReadonlySet<string> = new Set(['ratelimit-policy', 'ratelimit'])

/**
 * Puts a decision's RateLimit fields on the client's answer, next to those of the other member
 * requests it caused: one item per limit name, the latest decision's (the one with the least
 * left). `Retry-After` belongs to a refusal only, which the error carries itself.
 */
export function noteLimitHeaders(
  res: ServerResponse,
  headers: Readonly<Record<string, string>>,
): void {
  if (res.headersSent) return
  for (const name in headers) {
    if (name === 'retry-after') continue
    const value = headers[name] as string
    const prev = res.getHeader(name)
    res.setHeader(
      name,
      typeof prev === 'string' && ITEM_LISTS.has(name) ? mergeItems(prev, value) : value,
    )
  }
}

/** `"a";r=1, "b";r=0` with `"a";r=0` → `"a";r=0, "b";r=0` (limit names need no escaping). */
function mergeItems(prev: string, next: string): string {
  const items = new Map<string, string>()
  for (const list of [prev, next])
    for (const item of list.split(', ')) {
      if (item === '') continue
      const end = item.indexOf(';')
      items.set(end < 0 ? item : item.slice(0, end), item)
    }
  return [...items.values()].join(', ')
}
