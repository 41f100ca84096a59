import type { ServerResponse } from 'node:http'
import type { Principal } from '../auth/principal.js'
import type { EndpointCall } from '../endpoint/call.js'
import { admit, type LimitDeps } from '../endpoint/limit.js'
import { GatewayError } from '../errors.js'
import type { LimitVerdict } from '../limits/limiter.js'
import type { McpTarget } from '../mcp/classify.js'
import type { MemberServer, VirtualRequest } from './request.js'

/**
 * Whose member requests a limit counts (docs/rate-limits.md §Keys): the client's caller, its
 * connection's peer and its headers, whichever member request the gateway makes for it; `res`
 * is the client's answer, which carries the RateLimit fields of the decisions.
 */
interface LimitedCaller {
  readonly principal: Principal | undefined
  readonly call: Pick<EndpointCall, 'peer' | 'headers'>
  readonly res: ServerResponse
}

/** One member request a caller's request causes: the member, its method and its own targets. */
export interface MemberAsk {
  readonly member: MemberServer
  readonly method: string
  readonly targets: readonly McpTarget[]
}

/** One member request of `caller`, decided by the member's limits; throws 429 when refused. */
export function admitMember(
  limiting: LimitDeps,
  caller: LimitedCaller,
  ask: MemberAsk,
): Promise<LimitVerdict> {
  const req = {
    principal: caller.principal,
    peer: caller.call.peer,
    headers: caller.call.headers,
    method: ask.method,
  }
  return admit(limiting, req, ask.member.name, ask.targets)
}

/**
 * The limit decisions of one fan-out round's member requests: the admitted ones hold their
 * concurrency slots until `release()`; a refused member is left out of the round with its
 * refusal (docs/virtual-servers.md "Rate limits").
 */
export class Admissions {
  constructor(
    private readonly refusals: ReadonlyMap<number, GatewayError>,
    private readonly verdicts: readonly LimitVerdict[],
  ) {}

  /** Why member `m`'s request was refused; undefined when it was admitted. */
  refusal(m: number): GatewayError | undefined {
    return this.refusals.get(m)
  }

  /** Whether some member was refused (a merged answer then is partial, never a cache hit). */
  get someRefused(): boolean {
    return this.refusals.size > 0
  }

  /** The refusal to answer with when every member's request was refused (none was admitted). */
  get allRefused(): GatewayError | undefined {
    if (this.verdicts.length > 0) return undefined
    for (const refusal of this.refusals.values()) return refusal
    return undefined
  }

  /** Gives back every slot taken (exactly once each: LimitVerdict.release). */
  release(): void {
    for (const v of this.verdicts) v.release?.()
  }
}

const UNLIMITED = new Admissions(new Map(), [])

/**
 * Decides the member requests of one fan-out round of `r`'s caller, each against its member's
 * limits (docs/virtual-servers.md "Rate limits"): `members` are indexes into the virtual
 * server's members, each asked `method` with no target, as a list read or a discovery is on the
 * member's own endpoint. Without limits: nothing is decided and nothing awaited.
 */
export function admitMembers(
  r: VirtualRequest,
  members: readonly number[],
  method: string,
): Admissions | Promise<Admissions> {
  const limiting = r.deps.limiting
  if (limiting === undefined) return UNLIMITED
  const asks = members.map((m) => ({ member: r.v.members[m] as MemberServer, method, targets: [] }))
  return decideEach(limiting, r, asks).then((decided) => {
    const refusals = new Map<number, GatewayError>()
    const verdicts: LimitVerdict[] = []
    decided.forEach((d, k) => {
      if (d instanceof GatewayError) refusals.set(members[k] as number, d)
      else verdicts.push(d)
    })
    return new Admissions(refusals, verdicts)
  })
}

/**
 * Decides every member request at once, admitted whole or not at all: over any member's limit,
 * the slots already taken are given back and that refusal (429) is thrown, so nothing is held
 * on the other members either (docs/virtual-servers.md "listen"). Resolves with the release of
 * every slot taken, to be called once the requests and streams are over.
 */
export async function admitAll(
  limiting: LimitDeps | undefined,
  caller: LimitedCaller,
  asks: readonly MemberAsk[],
): Promise<() => void> {
  if (limiting === undefined || asks.length === 0) return NO_RELEASE
  const decided = await decideEach(limiting, caller, asks)
  const verdicts = decided.filter((d): d is LimitVerdict => !(d instanceof GatewayError))
  const release = (): void => {
    for (const v of verdicts) v.release?.()
  }
  const refused = decided.find((d): d is GatewayError => d instanceof GatewayError)
  if (refused === undefined) return release
  // SECURITY: all or nothing; a refused listen holds no stream on any member.
  release()
  throw refused
}

const NO_RELEASE = (): void => undefined

/**
 * Each member request decided by its member's limits, in parallel: a verdict, or the 429 refusal
 * admit() throws (a GatewayError). The RateLimit fields of every decision go on the caller's answer.
 */
async function decideEach(
  limiting: LimitDeps,
  caller: LimitedCaller,
  asks: readonly MemberAsk[],
): Promise<(LimitVerdict | GatewayError)[]> {
  const settled = await Promise.allSettled(asks.map((a) => admitMember(limiting, caller, a)))
  const out: (LimitVerdict | GatewayError)[] = []
  let failure: unknown
  for (const s of settled) {
    if (s.status === 'fulfilled') {
      noteLimitHeaders(caller.res, s.value.headers)
      out.push(s.value)
    } else if (s.reason instanceof GatewayError) {
      // admit() throws nothing else: a refusal (rate_limited, or a limit's full table).
      noteLimitHeaders(caller.res, s.reason.headers ?? {})
      out.push(s.reason)
    } else failure ??= s.reason
  }
  if (failure !== undefined) {
    for (const d of out) if (!(d instanceof GatewayError)) d.release?.()
    throw failure
  }
  return out
}

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
