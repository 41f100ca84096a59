import { paramDeclarations, type ParamDeclaration } from '../mcp/param-headers.js'
import { appsOf, type MemberApps } from './apps.js'
import { buildNameTable, type Collision, type NameTable, type PrefixMode } from './names.js'
import { buildRootTable, rebase, rootOf, type RootTable } from './uri-names.js'

/** Shortest time what the lists said is trusted for routing (docs/virtual-servers.md §Routing). */
const MIN_FRESH_MS = 1000
/** Shortest time between the end of one routing refresh of a kind and the start of the next. */
const MIN_REFRESH_INTERVAL_MS = 1000
const NO_PARAMS: readonly ParamDeclaration[] = Object.freeze([])

/**
 * Named kinds a virtual server renames: tools, prompts and event types (docs/events.md; resource
 * URIs are never renamed).
 */
export type NamedKind = 'tools' | 'prompts' | 'events'
/** URI kinds: resource URIs and resource templates, routed by who serves them. */
export type UriKind = 'resources' | 'resourceTemplates'
/** Skills, by the URI of their SKILL.md: each member's renamed under its own root (uri-names.ts). */
type SkillKind = 'skills'
/** Every kind of list a virtual server learns from. */
export type ListKind = NamedKind | UriKind | SkillKind
/** The lists a member's renamed roots come from: skills/list, tools/list (app resources), resources/list. */
type RootSource = 'skills' | 'tools' | 'resources'

/**
 * What a virtual server has learnt from its members' lists: who serves which name and URI. Calls
 * are routed from it without a list fetch; it is rebuilt from every list page that passes through,
 * and dropped on a member's list_changed (`invalidate`) or once the lists' ttl has run out.
 */
export class VirtualState {
  private readonly owned: Record<NamedKind, Set<string>[]>
  private readonly uris: Record<UriKind, Map<string, Set<number>>>
  /** Per member: own tool name → its parameter headers (mcp/param-headers.ts), tools with any. */
  private readonly params: Map<string, readonly ParamDeclaration[]>[]
  private tables: Partial<Record<NamedKind, NameTable>> = {}
  /** Per list, per member: the roots a virtual server renames (skills, app resources). */
  private readonly roots: Record<RootSource, Set<string>[]>
  private rootTable: RootTable | undefined
  /** Per member: its MCP Apps, as its tools/list says (virtual/apps.ts). */
  private readonly apps: MemberApps[]
  private readonly freshUntil: Partial<Record<ListKind, number>> = {}
  /** The routing refresh of a kind under way, which every miss meanwhile waits for. */
  private readonly refreshing: Partial<Record<ListKind, Promise<void>>> = {}
  /** When the next routing refresh of a kind may start. */
  private readonly nextRefresh: Partial<Record<ListKind, number>> = {}
  private readonly refreshIntervalMs: number
  /** Collisions and over-long names already reported, so each is logged once. */
  private readonly reported = new Set<string>()

  constructor(
    readonly members: readonly string[],
    readonly mode: PrefixMode,
    /** The virtual server's `fanOutTimeoutMs`: the longest one refresh may take. */
    fanOutTimeoutMs = 0,
    private readonly now: () => number = () => performance.now(),
  ) {
    // A refresh is followed by a pause at least as long as one may last, so even a member that
    // never answers spends at most half its time on one virtual server's refreshes.
    this.refreshIntervalMs = Math.max(MIN_REFRESH_INTERVAL_MS, fanOutTimeoutMs)
    this.owned = {
      tools: members.map(() => new Set()),
      prompts: members.map(() => new Set()),
      events: members.map(() => new Set()),
    }
    this.uris = { resources: new Map(), resourceTemplates: new Map() }
    this.params = members.map(() => new Map())
    this.roots = {
      skills: members.map(() => new Set()),
      tools: members.map(() => new Set()),
      resources: members.map(() => new Set()),
    }
    this.apps = members.map(() => appsOf(undefined))
  }

  /**
   * Records the roots one member's page of `source` shows (`first` restarts them): its skills'
   * directories, its apps' `ui://` resources, and the renamed ones of its resources/list.
   */
  noteRoots(source: RootSource, member: number, roots: readonly string[], first: boolean): void {
    const set = this.roots[source][member]
    if (set === undefined) return
    if (first) set.clear()
    for (const r of roots) set.add(r)
    this.rootTable = undefined
  }

  /** Records the apps one member's tools/list page shows (`first` restarts them). */
  noteApps(member: number, tools: unknown, first: boolean): void {
    const known = this.apps[member]
    if (known === undefined) return
    this.apps[member] = appsOf(tools, first ? undefined : known)
    this.noteRoots('tools', member, [...(this.apps[member]?.resources ?? [])], first)
  }

  /** The apps of a member, as its last tools/list pages said. */
  appsOf(member: number): MemberApps | undefined {
    return this.apps[member]
  }

  /** The renamed roots of every member, as exposed (uri-names.ts). */
  rootTableOf(): RootTable {
    let t = this.rootTable
    if (t === undefined) {
      const owned = this.members.map((_, i) => {
        const all = new Set<string>()
        for (const source of ['skills', 'tools', 'resources'] as const)
          for (const r of this.roots[source][i] ?? []) all.add(r)
        return all
      })
      t = buildRootTable(this.members, owned, this.mode)
      this.rootTable = t
    }
    return t
  }

  /**
   * A member's own URI as clients see it: rebased onto its exposed root when it is under one of
   * the member's renamed roots; as it is when under none; undefined when its root is unreachable
   * (a collision under `prefix: never`, a clash).
   */
  exposeUri(member: number, own: string): string | undefined {
    const t = this.rootTableOf()
    const mine = t.exposed[member]
    if (mine === undefined) return own
    const root = rootOf(own, mine)
    if (root !== undefined) return rebase(own, root, mine.get(root) as string)
    return this.underRoot(member, own) ? undefined : own
  }

  /** The member and own URI of an exposed URI under a renamed root, if any. */
  routeUri(exposed: string): { readonly member: number; readonly own: string } | undefined {
    const t = this.rootTableOf()
    const root = rootOf(exposed, t.routes)
    if (root === undefined) return undefined
    const route = t.routes.get(root)
    return route === undefined
      ? undefined
      : { member: route.member, own: rebase(exposed, root, route.own) }
  }

  /** Whether `uri` is at or under one of `member`'s renamed roots (reachable or not). */
  underRoot(member: number, uri: string): boolean {
    const all = new Map<string, true>()
    for (const source of ['skills', 'tools', 'resources'] as const)
      for (const r of this.roots[source][member] ?? []) all.set(r, true)
    return rootOf(uri, all) !== undefined
  }

  /** Records the names of one member's page (`first`: its first page, which restarts its set). */
  notePage(
    kind: NamedKind | UriKind,
    member: number,
    values: readonly string[],
    first: boolean,
  ): void {
    if (kind === 'tools' || kind === 'prompts' || kind === 'events') {
      const set = this.owned[kind][member]
      if (set === undefined) return
      if (first) set.clear()
      for (const v of values) set.add(v)
      delete this.tables[kind]
      return
    }
    const map = this.uris[kind]
    if (first) for (const owners of map.values()) owners.delete(member)
    for (const v of values) {
      const owners = map.get(v)
      if (owners === undefined) map.set(v, new Set([member]))
      else owners.add(member)
    }
  }

  /**
   * Records the parameter-header declarations of one member's `tools/list` page, as the member
   * itself lists them (its own names, before curation: curation never changes a schema), with
   * notePage's `first`. What a 2025-era client's call to that tool is sent with (`paramsOf`).
   */
  noteParams(member: number, tools: unknown, first: boolean): void {
    const map = this.params[member]
    if (map === undefined) return
    if (first) map.clear()
    if (!Array.isArray(tools)) return
    for (const tool of tools as unknown[]) {
      if (typeof tool !== 'object' || tool === null) continue
      const { name, inputSchema } = tool as { name?: unknown; inputSchema?: unknown }
      if (typeof name !== 'string') continue
      const declared = paramDeclarations(inputSchema)
      if (declared.length > 0) map.set(name, declared)
      else map.delete(name)
    }
  }

  /** The parameter headers member `member` declares for its own tool `name` (none when unknown). */
  paramsOf(member: number, name: string): readonly ParamDeclaration[] {
    return this.params[member]?.get(name) ?? NO_PARAMS
  }

  /**
   * Marks a kind known in full for `ttlMs` (the lists' ttl), at least MIN_FRESH_MS: a name nobody
   * serves then costs no list fetch for that long, so unknown names cannot multiply list reads.
   */
  markFresh(kind: ListKind, ttlMs: number): void {
    this.freshUntil[kind] = this.now() + Math.max(ttlMs, MIN_FRESH_MS)
  }

  isFresh(kind: ListKind): boolean {
    return (this.freshUntil[kind] ?? Number.NEGATIVE_INFINITY) > this.now()
  }

  /**
   * A routing refresh of `kind` (docs/virtual-servers.md §Routing): the one under way when there
   * is one (single flight: concurrent misses share it; its promise never rejects for them), else
   * `start()` when the throttle allows (its own promise, which may reject for its starter), else
   * undefined. Whether it succeeds, fails or stays partial, the next may start only
   * `refreshIntervalMs` after it has ended, so unknown names cannot multiply member reads.
   */
  refresh(kind: ListKind, start: () => Promise<void>): Promise<void> | undefined {
    const running = this.refreshing[kind]
    if (running !== undefined) return running
    // SECURITY: throttled whether or not the last refresh succeeded.
    if ((this.nextRefresh[kind] ?? Number.NEGATIVE_INFINITY) > this.now()) return undefined
    const own = start()
    const ended = (): void => {
      delete this.refreshing[kind]
      this.nextRefresh[kind] = this.now() + this.refreshIntervalMs
    }
    this.refreshing[kind] = own.then(ended, ended)
    return own
  }

  /** The current name table of a kind. */
  table(kind: NamedKind): NameTable {
    let t = this.tables[kind]
    if (t === undefined) {
      t = buildNameTable(this.members, this.owned[kind], this.mode)
      this.tables[kind] = t
    }
    return t
  }

  /** The members serving a URI or template. */
  ownersOf(kind: UriKind, value: string): readonly number[] {
    return [...(this.uris[kind].get(value) ?? [])]
  }

  /** Every known template with its owners (resources/read of a URI no list named). */
  templates(): IterableIterator<[string, Set<number>]> {
    return this.uris.resourceTemplates.entries()
  }

  /** Forgets what a kind's lists said (a member's list_changed; docs/virtual-servers.md §Cache). */
  invalidate(kind?: ListKind): void {
    for (const k of kind === undefined
      ? (['tools', 'prompts', 'events', 'resources', 'resourceTemplates', 'skills'] as const)
      : [kind])
      delete this.freshUntil[k]
  }

  /** Collisions not reported before (each is logged once per change). */
  news(kind: NamedKind): { collisions: Collision[] } {
    const t = this.table(kind)
    const collisions = t.collisions.filter((c) =>
      this.firstReport(`${kind} c ${c.name} ${c.members.join(',')}`),
    )
    return { collisions }
  }

  /** What /readyz shows: names unreachable because of a collision. */
  problems(): string[] {
    const out: string[] = []
    for (const kind of ['tools', 'prompts', 'events'] as const) {
      const t = this.tables[kind]
      if (t === undefined) continue
      for (const c of t.collisions)
        if (c.outcome === 'unreachable')
          out.push(
            `${kind} ${JSON.stringify(c.name)}: served by ${c.members.join(', ')} under prefix: never; unreachable`,
          )
    }
    return out
  }

  private firstReport(key: string): boolean {
    if (this.reported.has(key)) return false
    this.reported.add(key)
    return true
  }
}
