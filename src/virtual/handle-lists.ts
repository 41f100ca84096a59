import { memberListView } from '../catalog/member.js'
import { endpointOf } from '../endpoint/endpoint.js'
import { GatewayError } from '../errors.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { chainFilters, type ListFilter } from '../mcp/list-filter.js'
import { GATEWAY_INFO, MODERN_VERSIONS } from '../mcp/protocol.js'
import { replaceParam } from '../mcp/rewrite.js'
import type { PendingPages } from './cursor.js'
import { fanOut, fanOutDeadline, type Outcome } from './fan-out.js'
import { itemsOf, LISTS, mergeItems, type ListSpec, type MemberPage } from './lists.js'
import { mergeCapabilities, mergeHints, mergeInstructions, SERVER_INFO_META } from './merge.js'
import type { MergedRequest } from './merged-cache.js'
import {
  answer,
  inBand,
  lacksMethod,
  readBody,
  toCode,
  type Answer,
  type MemberServer,
  type VirtualRequest,
} from './request.js'
import { admitMembers, type Admissions } from './member-admission.js'
import { askMember } from './route.js'
import { SkillAnswers } from '../mcp/skill-answers.js'
import type { ListKind, NamedKind } from './state.js'
import { skillRoot } from './uri-names.js'
import { memberEvents } from './trace.js'
import { waitingMeta } from './waiting.js'

export async function discover(r: VirtualRequest): Promise<Answer> {
  const { v } = r
  const all = v.members.map((_, i) => i)
  const deadline = fanOutDeadline(v.config.fanOutTimeoutMs)
  // Counted against every member's limits before any cache answers, as on its own endpoint.
  const admitted = await admitMembers(r, all, 'server/discover')
  try {
    return await discoverFrom(r, all, admitted, deadline)
  } finally {
    admitted.release()
  }
}

async function discoverFrom(
  r: VirtualRequest,
  all: readonly number[],
  admitted: Admissions,
  deadline: AbortSignal,
): Promise<Answer> {
  const { v } = r
  const nobody = admitted.allRefused
  if (nobody !== undefined) throw nobody
  const cacheKey = mergedKey(r, [])
  const hit = admitted.someRefused ? undefined : cachedAnswer(r, cacheKey)
  if (hit !== undefined) return hit
  const outcomes = await fanOut(all, deadline, (i, signal) => {
    const refused = admitted.refusal(i)
    if (refused !== undefined) throw refused
    return askMember(r, v.members[i] as MemberServer, 'server/discover', r.text, signal)
  })
  memberEvents(r.call.trace, 'server/discover', v.memberNames, outcomes)
  const results: (readonly [string, Record<string, unknown>])[] = []
  const missing: string[] = []
  outcomes.forEach((o, i) => {
    const name = v.memberNames[i] as string
    const result = o.ok && isRecord(o.value.result) ? o.value.result : undefined
    if (result === undefined) missing.push(name)
    // SECURITY: each member's instructions as its own endpoint shows them, curated and judged
    // against their pin (docs/catalog.md §Curation), before they are joined.
    else
      results.push([name, memberListView(v.members[i] as MemberServer, 'server/discover', result)])
  })
  const partial = reportPartial(r, 'server/discover', missing, outcomes)
  const hints = mergeHints(
    results.map(([, x]) => x),
    false,
    partial,
  )
  const result: Record<string, unknown> = {
    // What the gateway serves a virtual server's clients (it speaks each member's own era to it).
    supportedVersions: MODERN_VERSIONS,
    capabilities: mergeCapabilities(results.map(([, x]) => x)),
    ...withInstructions(mergeInstructions(results)),
    resultType: 'complete',
    ttlMs: hints.ttlMs,
    cacheScope: hints.cacheScope,
    // The virtual server's own identity, never a member's: it is one server to its clients.
    _meta: { [SERVER_INFO_META]: GATEWAY_INFO, ...waitingMeta(outcomes) },
  }
  if (!partial) storeMerged(r, cacheKey, result)
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
  // Each member's view as its admission gives it (policy and scopes, on its own names), then its
  // catalog view (docs/catalog.md §Curation); skills within the per-skill limits first, as on the
  // member's own endpoint (mcp/skill-answers.ts).
  const checked = spec.kind === 'skills' ? new SkillAnswers(undefined) : undefined
  const filters = v.members.map((m) =>
    chainFilters(
      chainFilters(checked, endpointOf(r.deps.endpoints, m.name).listView(r.principal)),
      m.catalog,
    ),
  )
  const cacheKey = mergedKey(r, filters)
  const asked = pending === undefined ? v.members.map((_, i) => i) : pending.map(([m]) => m)
  // One deadline for every page this request reads, the learning pass's included.
  const deadline = fanOutDeadline(v.config.fanOutTimeoutMs)
  // Counted against every member asked before any cache answers, as on its own endpoint.
  const admitted = await admitMembers(r, asked, r.method)
  try {
    const nobody = admitted.allRefused
    if (nobody !== undefined) throw nobody
    const hit = admitted.someRefused ? undefined : cachedAnswer(r, cacheKey)
    if (hit !== undefined) return hit
    const page = await fetchPage(r, spec, pending, deadline, { admitted })
    return listed(r, spec, pending, filters, cacheKey, page, deadline)
  } finally {
    admitted.release()
  }
}

/** The merged answer of a list page; a first page of a list some member paginates learns first. */
async function listed(
  r: VirtualRequest,
  spec: ListSpec,
  pending: PendingPages | undefined,
  filters: readonly (ListFilter | undefined)[],
  cacheKey: MergedRequest | undefined,
  page: Page,
  deadline: AbortSignal,
): Promise<Answer> {
  const { v } = r
  // A first page of a list some member paginates: names are decided on the whole of it.
  const named =
    spec.kind === 'tools' ||
    spec.kind === 'prompts' ||
    spec.kind === 'events' ||
    spec.kind === 'skills'
  if (named && pending === undefined && page.next.length > 0 && !v.state.isFresh(spec.kind))
    await learnRest(r, spec, page.next, page.ttlMs, deadline)
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
  // Members left out until the caller connects their account say so (virtual/waiting.ts).
  if (page.waiting !== undefined) result._meta = page.waiting
  if (!page.partial) storeMerged(r, cacheKey, result)
  // The names clients call this endpoint by, for its tool-call metrics (as a server's own list
  // teaches them, observability/tool-labels.ts): throttled, and only from an answer built anyway.
  if (spec.kind === 'tools') r.deps.metrics.tools.learner(v.name)?.({ result }, { sse: false })
  return answer(r, result, page.partial ? 'virtual_partial' : 'ok')
}

/** One merged page: each member's result, which members have more, and whether any is missing. */
interface Page {
  readonly results: (readonly [number, Record<string, unknown>])[]
  readonly next: [number, string][]
  readonly partial: boolean
  /** The smallest ttl of the members' results. */
  readonly ttlMs: number
  /** The caller's refusal when every member's limit refused its request (nothing was sent). */
  readonly refused: Error | undefined
  /** `_meta` naming members that wait for the caller to connect (virtual/waiting.ts). */
  readonly waiting?: Record<string, unknown> | undefined
}

/** How {@link fetchPage} reads: the method and bodies of its member requests, their admission. */
interface PageRead {
  /** The list method (default: the client's). */
  readonly method?: string
  /** The request text for a member's cursor; the client's body, its cursor replaced, by default. */
  readonly bodyFor?: (cursor: string | undefined) => string | undefined
  /** The members' limit decisions when the caller took them; else fetchPage takes its own. */
  readonly admitted?: Admissions
}

/**
 * Fetches one page of a list from every member (the first page) or from the members a cursor
 * names, in parallel, by `deadline` (the request's one fan-out deadline), and records the names
 * seen (virtual/state.ts). Each member request counts against its member's limits for the caller
 * (docs/virtual-servers.md "Rate limits"): a refused member is left out, as one that fails.
 */
async function fetchPage(
  r: VirtualRequest,
  spec: ListSpec,
  pending: PendingPages | undefined,
  deadline: AbortSignal,
  read: PageRead = {},
): Promise<Page> {
  const { v } = r
  const method = read.method ?? r.method
  const bodyFor =
    read.bodyFor ??
    ((c: string | undefined) => (c === undefined ? r.text : replaceParam(r.text, ['cursor'], c)))
  const asks: [number, string | undefined][] =
    pending === undefined
      ? v.members.map((_, i) => [i, undefined])
      : pending.map(([m, c]) => [m, c])
  const admitted = read.admitted ?? (await admitMembers(r, membersOf(asks), method))
  let outcomes: Outcome<Record<string, unknown>>[]
  try {
    outcomes = await fanOut(
      asks.map((_, k) => k),
      deadline,
      (k, signal) => {
        const [m, memberCursor] = asks[k] as [number, string | undefined]
        // SECURITY: a member request over the caller's limit is not sent (endpoint/limit.ts).
        const refused = admitted.refusal(m)
        if (refused !== undefined) throw refused
        const body = bodyFor(memberCursor)
        if (body === undefined) throw new GatewayError('invalid_params', 'invalid cursor')
        return askMember(r, v.members[m] as MemberServer, method, body, signal)
      },
    )
  } finally {
    // Every member request of this page is over (stragglers are aborted): its slots go back.
    if (read.admitted === undefined) admitted.release()
  }
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
    if (spec.kind === 'skills') v.state.noteRoots('skills', m, values.map(skillRoot), first)
    else v.state.notePage(spec.kind, m, values, first)
    // The member's own definitions: a 2025-era client's call is sent their parameter headers,
    // and an app its resource under the virtual server's name (virtual/apps.ts).
    if (spec.kind === 'tools') {
      v.state.noteParams(m, result.tools, first)
      v.state.noteApps(m, result.tools, first)
    }
    // Its skills' files and apps' resources that resources/list shows are renamed with them.
    if (spec.kind === 'resources')
      v.state.noteRoots('resources', m, values.filter(renamedScheme).map(skillRoot), first)
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
  const meta = waitingMeta(outcomes)
  const waiting = Object.keys(meta).length === 0 ? undefined : meta
  return { results, next, partial, ttlMs, refused: admitted.allRefused, waiting }
}

function membersOf(asks: readonly (readonly [number, unknown])[]): number[] {
  return asks.map(([m]) => m)
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

/**
 * The merged answer's key: the one canonical request key every cache layer uses
 * (cache/request.ts), plus each member's policy view, which the answer is filtered by before it
 * is kept; undefined when merged answers are not kept or the request is not cacheable.
 */
function mergedKey(
  r: VirtualRequest,
  filters: readonly (ListFilter | undefined)[],
): MergedRequest | undefined {
  const { merged } = r.v
  const cache = r.deps.cache
  if (merged === undefined || cache === undefined) return undefined
  // SECURITY: a view that depends on who asks makes the answer private (virtual/merge.ts), so it
  // is part of what the answer depends on, as in the edge cache's filtered variants.
  const views = filters.map((f) =>
    f === undefined ? '' : `${f.identityDependent ? 'i' : 'o'}:${f.key}`,
  )
  const of = { mcp: r.call.mcp, text: r.text, principal: r.principal, members: r.v.members }
  return merged.request(cache, of, views)
}

function cachedAnswer(r: VirtualRequest, key: MergedRequest | undefined): Answer | undefined {
  const cache = r.deps.cache
  if (r.v.merged === undefined || cache === undefined || key === undefined) return undefined
  const text = r.v.merged.get(cache, key)
  if (text === undefined) return undefined
  cache.event('hit')
  return inBand(r, 'cache_hit', text)
}

function storeMerged(
  r: VirtualRequest,
  key: MergedRequest | undefined,
  result: Readonly<Record<string, unknown>>,
): void {
  const cache = r.deps.cache
  if (r.v.merged !== undefined && cache !== undefined && key !== undefined)
    r.v.merged.set(cache, key, result)
}

/**
 * The member and own name of an exposed name. A name the map does not know, while it is not
 * fresh, makes the gateway read the lists again before deciding: one refresh at a time per kind,
 * shared by every request that misses meanwhile, and none again until the throttle has passed,
 * whatever the last one achieved (virtual/state.ts). While throttled the name is unknown and no
 * member is asked (docs/virtual-servers.md §Routing).
 */
export async function routeName(
  r: VirtualRequest,
  kind: NamedKind,
  exposed: string,
): Promise<{ member: number; name: string } | undefined> {
  const state = r.v.state
  const known = state.table(kind).routes.get(exposed)
  if (known !== undefined) return known
  if (state.isFresh(kind)) return undefined
  await refreshKinds(r, [kind])
  return state.table(kind).routes.get(exposed)
}

const LIST_OF: Readonly<Record<ListKind, string>> = {
  tools: 'tools/list',
  prompts: 'prompts/list',
  events: 'events/list',
  resources: 'resources/list',
  resourceTemplates: 'resources/templates/list',
  skills: 'skills/list',
}

/**
 * The schemes whose resources/list items a virtual server renames with their member's roots:
 * the skills extension's and MCP Apps' (uri-names.ts); other URIs are never renamed.
 */
function renamedScheme(uri: string): boolean {
  return uri.startsWith('skill://') || uri.startsWith('ui://')
}

/**
 * Reads again the lists of those `kinds` that are not fresh, each through its single-flight,
 * throttled refresh (virtual/state.ts), all within one fan-out deadline of this request. A
 * refresh this request joins is another request's: its outcome is not this one's (a limit that
 * refused that caller is not this caller's answer). A refresh this request starts counts against
 * its caller's limits; when they refuse it at every member, this request is answered 429.
 */
export async function refreshKinds(r: VirtualRequest, kinds: readonly ListKind[]): Promise<void> {
  const state = r.v.state
  let deadline: AbortSignal | undefined
  const runs: Promise<void>[] = []
  for (const kind of kinds) {
    if (state.isFresh(kind)) continue
    const run = state.refresh(kind, () =>
      refresh(r, LIST_OF[kind], (deadline ??= fanOutDeadline(r.v.config.fanOutTimeoutMs))),
    )
    // SECURITY: throttled: the name is decided on what is known; nothing is sent to any member.
    if (run !== undefined) runs.push(run)
  }
  await Promise.all(runs)
}

/**
 * Fetches every page of a list from every member (bounded: MAX_REFRESH_PAGES per member, all by
 * `deadline`) to learn who serves what.
 */
async function refresh(r: VirtualRequest, method: string, deadline: AbortSignal): Promise<void> {
  const spec = LISTS[method] as ListSpec
  const read = { method, bodyFor: (c: string | undefined) => readBody(r, method, c) }
  const page = await fetchPage(r, spec, undefined, deadline, read)
  if (page.refused !== undefined) throw page.refused
  reportNames(r, spec)
  if (page.next.length > 0 && !page.partial)
    await learnRest(r, spec, page.next, page.ttlMs, deadline)
}

/**
 * Reads the remaining pages of members that paginate, for their names only, so that the names of
 * a first page already account for every collision (an `onCollision` prefix never changes between
 * the pages of one listing). Bounded: MAX_REFRESH_PAGES rounds, all by the request's `deadline`
 * (a round the deadline has passed sends nothing), each page counted against the caller's limits.
 */
async function learnRest(
  r: VirtualRequest,
  spec: ListSpec,
  next: PendingPages,
  ttlMs: number,
  deadline: AbortSignal,
): Promise<void> {
  const method = Object.keys(LISTS).find((k) => LISTS[k] === spec) as string
  const read = { method, bodyFor: (c: string | undefined) => readBody(r, method, c) }
  let pending = next
  let ttl = ttlMs
  for (let round = 0; round < MAX_REFRESH_PAGES; round++) {
    if (deadline.aborted) return
    const page = await fetchPage(r, spec, pending, deadline, read)
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
