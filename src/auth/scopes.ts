import type { AuthRuntime } from './compile.js'
import { insufficientScope } from './resource.js'
import type { GatewayConfig, ServerConfig } from '../config/schema.js'
import type { McpTarget } from '../mcp/classify.js'
import { compilePattern, type Matcher } from '../match/pattern.js'

/**
 * Scopes per tool, prompt and resource (docs/auth.md §Scopes per tool): a call needs its server's
 * `requiredScopes` plus the scopes of every `scopes:` pattern its target matches. A token that
 * lacks one gets a 403 whose challenge names every scope the call needs through the endpoint it
 * came to (spec 2026-07-28 basic/authorization; RFC 6750 §3.1), so a client can step up once.
 */

/** The kinds of target `scopes:` names (an event or an extra method needs no scope of its own). */
type ScopedKind = 'tool' | 'prompt' | 'resource'

/** One `scopes:` pattern: what it matches and the scopes a matching target needs. */
interface ScopeEntry {
  readonly matches: Matcher
  readonly scopes: readonly string[]
}

/** One server's `scopes:`, compiled. */
interface ServerScopes {
  /** The server's own `requiredScopes`. */
  readonly required: readonly string[]
  readonly byKind: Readonly<Record<ScopedKind, readonly ScopeEntry[]>>
  /** `scopesInLists: stepUp`: lists show what policy allows, whatever the token's scopes. */
  readonly stepUpInLists: boolean
  /** Every scope `scopes:` names, sorted: what a list view depends on. */
  readonly named: readonly string[]
}

/** An endpoint (a server, or a virtual server) through which scoped targets are called. */
interface EndpointScopes {
  /** What the endpoint itself requires (a virtual server: every member's `requiredScopes`). */
  readonly required: readonly string[]
  readonly metadataUrl: string
  /**
   * 403 challenges by server, kind and the patterns that matched: built once per config (the
   * compiled gate is part of the runtime), on first use, since which patterns a name can match
   * together is only known from names. Bounded: past the cap a challenge is built per refusal.
   */
  readonly challenges: Map<string, string>
}

/** Challenges kept per endpoint; far more than a config's distinct pattern combinations. */
const MAX_CHALLENGES = 1024

/** The scopes a caller holds (the verified Principal's), or none without a token. */
type Held = ReadonlySet<string> | undefined

/** `scopes:` of every server, compiled once per config; undefined when no server has any. */
export class ScopeGate {
  private constructor(
    private readonly servers: ReadonlyMap<string, ServerScopes>,
    private readonly endpoints: ReadonlyMap<string, EndpointScopes>,
  ) {}

  static compile(config: GatewayConfig, auth: AuthRuntime | undefined): ScopeGate | undefined {
    const servers = compileServers(config)
    // The loader refuses `scopes:` without `auth:` (auth/compile.ts checkAuthConfig).
    if (servers.size === 0 || auth === undefined) return undefined
    const endpoints = new Map<string, EndpointScopes>()
    for (const [name, a] of auth.servers) {
      endpoints.set(name, {
        required: a.requiredScopes,
        metadataUrl: a.metadataUrl,
        challenges: new Map(),
      })
    }
    return new ScopeGate(servers, endpoints)
  }

  /** The scope rules alone, for `mcp-edge explain` (needs(), no challenges). */
  static offline(config: GatewayConfig): ScopeGate | undefined {
    const servers = compileServers(config)
    return servers.size === 0 ? undefined : new ScopeGate(servers, new Map())
  }

  /**
   * Every scope a call of `target` on `server` needs on the server's own endpoint: its
   * `requiredScopes`, then the scopes of every pattern the target matches (undefined: the server
   * has no `scopes:`). What refusal() checks, spelled out for `mcp-edge explain`.
   */
  needs(server: string, target: McpTarget): readonly string[] | undefined {
    const s = this.servers.get(server)
    if (s === undefined) return undefined
    const needed = new Set(s.required)
    if (isScoped(target.kind)) {
      const value = target.kind === 'resource' ? target.uri : target.name
      for (const e of s.byKind[target.kind])
        if (e.matches(value)) for (const x of e.scopes) needed.add(x)
    }
    return [...needed]
  }

  /** Whether `server` has `scopes:` of its own. */
  covers(server: string): boolean {
    return this.servers.has(server)
  }

  /**
   * The `WWW-Authenticate` challenge of the 403 when `held` lacks a scope calling `target` of
   * `server` needs; undefined when it holds them all. `endpoint` is where the call came in: the
   * server itself, or the virtual server it is a member of, whose metadata the challenge names.
   * The endpoint's own `requiredScopes` were checked at authentication (pipeline/authenticate.ts).
   */
  refusal(endpoint: string, server: string, held: Held, target: McpTarget): string | undefined {
    const s = this.servers.get(server)
    if (s === undefined || !isScoped(target.kind)) return undefined
    const value = target.kind === 'resource' ? target.uri : target.name
    const entries = s.byKind[target.kind]
    let matched: number[] | undefined
    let lacking = false
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as ScopeEntry
      if (!entry.matches(value)) continue
      ;(matched ??= []).push(i)
      // SECURITY: every scope of every matching pattern, not just one pattern's.
      if (!lacking && !entry.scopes.every((scope) => held?.has(scope) === true)) lacking = true
    }
    if (!lacking || matched === undefined) return undefined
    return this.challenge(endpoint, server, target.kind, matched)
  }

  /**
   * Whether list items of `server` the caller may not call for lack of scopes are hidden:
   * undefined when they are not (no `scopes:`, or `scopesInLists: stepUp`), else the view.
   */
  listView(server: string, held: Held): ScopeListView | undefined {
    const s = this.servers.get(server)
    if (s === undefined || s.stepUpInLists) return undefined
    // Equal keys filter identically: the view depends only on which named scopes are held.
    const key = `scopes:${server}:${s.named.filter((scope) => held?.has(scope) === true).join(' ')}`
    const visible = (kind: McpTarget['kind'], value: string): boolean =>
      !isScoped(kind) ||
      s.byKind[kind].every((e) => !e.matches(value) || e.scopes.every((x) => held?.has(x) === true))
    return { key, visible }
  }

  private challenge(
    endpoint: string,
    server: string,
    kind: ScopedKind,
    matched: readonly number[],
  ): string {
    const e = this.endpoints.get(endpoint)
    const s = this.servers.get(server)
    // Compiled from the same config: every endpoint and server is known. Fail closed regardless.
    if (e === undefined || s === undefined) return 'Bearer error="insufficient_scope"'
    const memo = `${server}\n${kind}\n${matched.join(',')}`
    const known = e.challenges.get(memo)
    if (known !== undefined) return known
    const entries = s.byKind[kind]
    const needed = new Set(e.required)
    for (const i of matched)
      for (const scope of (entries[i] as ScopeEntry).scopes) needed.add(scope)
    const built = insufficientScope(e.metadataUrl, [...needed])
    if (e.challenges.size < MAX_CHALLENGES) e.challenges.set(memo, built)
    return built
  }
}

/** A caller's view of one server's list items under `scopes:` (policy/list-view.ts applies it). */
export interface ScopeListView {
  readonly key: string
  /** Whether an item of this kind and name (a resource's URI or template) can be called. */
  readonly visible: (kind: McpTarget['kind'], value: string) => boolean
}

function isScoped(kind: McpTarget['kind']): kind is ScopedKind {
  return kind === 'tool' || kind === 'prompt' || kind === 'resource'
}

function compileServers(config: GatewayConfig): Map<string, ServerScopes> {
  const servers = new Map<string, ServerScopes>()
  for (const [name, s] of Object.entries(config.servers)) {
    const compiled = compileServer(s)
    if (compiled !== undefined) servers.set(name, compiled)
  }
  return servers
}

function compileServer(s: ServerConfig): ServerScopes | undefined {
  const { tools, prompts, resources } = s.scopes
  if (tools === undefined && prompts === undefined && resources === undefined) return undefined
  const entries = (table: Readonly<Record<string, readonly string[]>> | undefined): ScopeEntry[] =>
    Object.entries(table ?? {}).map(([p, scopes]) => ({ matches: compilePattern(p), scopes }))
  const byKind = { tool: entries(tools), prompt: entries(prompts), resource: entries(resources) }
  const named = [
    ...new Set(Object.values(byKind).flatMap((list) => list.flatMap((e) => e.scopes))),
  ].sort()
  return { required: s.requiredScopes, byKind, stepUpInLists: s.scopesInLists === 'stepUp', named }
}
