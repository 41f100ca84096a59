import { authContextOf } from '../cache/key.js'
import { memberListView } from '../catalog/member.js'
import { GatewayError } from '../errors.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { chainFilters } from '../mcp/list-filter.js'
import { replaceParam } from '../mcp/rewrite.js'
import type { PendingPages } from './cursor.js'
import { fanOut } from './fan-out.js'
import { itemsOf, LISTS, mergeItems, type ListSpec, type MemberPage } from './lists.js'
import {
  GATEWAY_INFO,
  mergeCapabilities,
  mergeHints,
  mergeInstructions,
  VIRTUAL_VERSIONS,
} from './merge.js'
import {
  answer,
  lacksMethod,
  readBody,
  toCode,
  type Answer,
  type MemberServer,
  type VirtualRequest,
} from './request.js'
import { askMember } from './route.js'
import type { NamedKind } from './state.js'
import { memberEvents } from './trace.js'

export async function discover(r: VirtualRequest): Promise<Answer> {
  const { v } = r
  const cacheKey = mergedKey(r, 'server/discover', undefined, [])
  const hit = cachedAnswer(r, cacheKey)
  if (hit !== undefined) return hit
  const all = v.members.map((_, i) => i)
  const outcomes = await fanOut(all, v.config.fanOutTimeoutMs, (i, signal) =>
    askMember(r, v.members[i] as MemberServer, 'server/discover', r.text, signal),
  )
  memberEvents(r.call.trace, 'server/discover', v.memberNames, outcomes)
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

export async function list(r: VirtualRequest): Promise<Answer> {
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
  const policy = r.ctx.policy
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
      return askMember(r, v.members[m] as MemberServer, method, body, signal)
    },
  )
  memberEvents(
    r.call.trace,
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
    const shown = memberListView(v.members[m] as MemberServer, method, result)
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
export function reportPartial(
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

function cachedAnswer(r: VirtualRequest, key: ReturnType<typeof mergedKey>): Answer | undefined {
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

/** The member and own name of an exposed name; a list fetch when the map is not fresh. */
export async function routeName(
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
export async function refresh(r: VirtualRequest, method: string): Promise<void> {
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
