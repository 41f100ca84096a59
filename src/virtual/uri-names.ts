import type { PrefixMode } from './names.js'

/**
 * Resource URIs a virtual server renames per member (docs/virtual-servers.md §Skills and MCP
 * Apps): a skill's directory (skills.mdx §Skill URIs: a skill's identity is the pair of server and
 * `uri`, and one origin's skill may never silently shadow another's) and an MCP App's `ui://`
 * resource (SEP-1865: a tool points at it, the host reads it back). Each is a *root*: the URI
 * itself and everything below it (`<root>/…`). Under `prefix` they are named as tools are: the
 * member's name as the first segment of the path, `skill://refunds` of member `billing` becoming
 * `skill://billing/refunds`, so a skill's name (its last segment) stays its name.
 */

/** Where an exposed root leads: the member (by index) and the member's own root. */
interface RootRoute {
  readonly member: number
  readonly own: string
  readonly exposed: string
}

/** The roots of every member, as exposed, and where each leads. */
export interface RootTable {
  /** exposed root → member and own root */
  readonly routes: ReadonlyMap<string, RootRoute>
  /** own root per member → exposed root */
  readonly exposed: readonly ReadonlyMap<string, string>[]
  /** Own roots two or more members serve (or that nest in another member's), with who. */
  readonly collisions: readonly { readonly root: string; readonly members: readonly string[] }[]
}

/** Directories of a URI looked at, at most (as mcp/skill-paths.ts). */
const MAX_DEPTH = 32

/** `<scheme>://<member>/<rest>`, or undefined for a URI without `scheme://`. */
export function prefixedUri(member: string, uri: string): string | undefined {
  const at = uri.indexOf('://')
  if (at <= 0) return undefined
  return `${uri.slice(0, at + 3)}${member}/${uri.slice(at + 3)}`
}

/** The root of a skill by its SKILL.md URI: its directory (skills.mdx §Resource Mapping). */
export function skillRoot(skillUri: string): string {
  return skillUri.endsWith('/SKILL.md') ? skillUri.slice(0, -'/SKILL.md'.length) : skillUri
}

/**
 * `uri` and the URIs it is under, deepest first: itself, then each prefix that ends before a `/`
 * of its path. Undefined past MAX_DEPTH directories.
 */
function selfAndAbove(uri: string): string[] | undefined {
  const at = uri.indexOf('://')
  const out = [uri]
  if (at <= 0) return out
  for (let i = uri.length - 1; i > at + 3; i--) {
    if (uri.charCodeAt(i) !== 0x2f) continue
    if (out.length > MAX_DEPTH) return undefined
    out.push(uri.slice(0, i))
  }
  return out
}

/** The root of `roots` that `uri` is at or under (deepest), if any. */
export function rootOf(uri: string, roots: ReadonlyMap<string, unknown>): string | undefined {
  if (roots.size === 0) return undefined
  for (const candidate of selfAndAbove(uri) ?? []) if (roots.has(candidate)) return candidate
  return undefined
}

/** `uri` with its root `from` replaced by `to`. */
export function rebase(uri: string, from: string, to: string): string {
  return `${to}${uri.slice(from.length)}`
}

/**
 * Decides every exposed root from the roots each member serves (`owned[i]` for member i), as
 * virtual/names.ts decides tool names: `always` prefixes all; `onCollision` the roots two members
 * both serve or one serves inside another's (both then reachable by prefix, neither shadowing the
 * other); `never` keeps them, and a root that collides is reachable under no name. An exposed root
 * two members would claim, or one nested in another member's exposed root, leads to neither.
 */
export function buildRootTable(
  members: readonly string[],
  owned: readonly ReadonlySet<string>[],
  mode: PrefixMode,
): RootTable {
  const servedBy = new Map<string, Set<number>>()
  owned.forEach((roots, i) => {
    for (const r of roots) {
      const by = servedBy.get(r)
      if (by === undefined) servedBy.set(r, new Set([i]))
      else by.add(i)
    }
  })
  const colliding = overlaps(servedBy)
  const collisions = [...colliding.entries()].map(([root, by]) => ({
    root,
    members: [...by].sort((a, b) => a - b).map((i) => members[i] as string),
  }))
  const claimed = new Map<string, Set<number>>()
  const planned: { member: number; own: string; exposed: string }[] = []
  for (const [root, by] of servedBy) {
    const collides = colliding.has(root)
    if (mode === 'never' && collides) continue
    for (const member of by) {
      const exposed =
        mode === 'always' || collides ? prefixedUri(members[member] as string, root) : root
      if (exposed === undefined) continue
      planned.push({ member, own: root, exposed })
      const at = claimed.get(exposed)
      if (at === undefined) claimed.set(exposed, new Set([member]))
      else at.add(member)
    }
  }
  // SECURITY: an exposed root that two members' roots would claim, or that nests in another
  // member's, routes to neither: a read never reaches a member the client did not mean.
  const clash = overlaps(claimed)
  const routes = new Map<string, RootRoute>()
  const exposed = members.map(() => new Map<string, string>())
  for (const p of planned) {
    if (clash.has(p.exposed)) continue
    routes.set(p.exposed, p)
    exposed[p.member]?.set(p.own, p.exposed)
  }
  return { routes, exposed, collisions }
}

/**
 * The roots served by more than one member, or nested in a root of another member (either way,
 * one member's URIs would be the other's too), each with every member involved.
 */
function overlaps(servedBy: ReadonlyMap<string, ReadonlySet<number>>): Map<string, Set<number>> {
  const out = new Map<string, Set<number>>()
  const mark = (root: string, by: Iterable<number>): void => {
    const set = out.get(root) ?? new Set<number>()
    for (const m of by) set.add(m)
    out.set(root, set)
  }
  for (const [root, by] of servedBy) {
    if (by.size > 1) mark(root, by)
    // SECURITY: a root too deep to look above is taken for one that collides.
    const above = selfAndAbove(root)
    if (above === undefined) {
      mark(root, by)
      continue
    }
    for (const a of above.slice(1)) {
      const outer = servedBy.get(a)
      if (outer === undefined) continue
      if ([...outer].some((m) => !by.has(m)) || [...by].some((m) => !outer.has(m))) {
        mark(root, [...by, ...outer])
        mark(a, [...by, ...outer])
      }
    }
  }
  return out
}
