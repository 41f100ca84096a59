import { createHash } from 'node:crypto'

/** How a virtual server exposes members' tool and prompt names. */
export type PrefixMode = 'never' | 'onCollision' | 'always'

/**
 * Longest exposed name. Clients commonly accept tool names of at most 64 characters
 * (`^[a-zA-Z0-9_-]{1,64}$`); a prefixed name stays under that (docs/virtual-servers.md §Names).
 */
export const MAX_NAME = 63
const HASH_CHARS = 6

/** Where an exposed name leads: the member (by index) and the member's own name. */
interface NameRoute {
  readonly member: number
  readonly name: string
}

/**
 * `<member>_<name>`, or, when that would exceed MAX_NAME, the member part shortened to its first
 * characters and a short hash of the whole member name. When even a hash-only member part leaves
 * no room for the name, the name part is shortened too: its first characters and a short hash of
 * member and name, so every tool stays reachable (docs/virtual-servers.md §Names). Deterministic:
 * the same member and name always give the same result, on every gateway; `explain` shows both.
 */
export function prefixedName(member: string, name: string): string {
  const full = `${member}_${name}`
  if (full.length <= MAX_NAME) return full
  const hash = shortHash(member)
  const room = MAX_NAME - name.length - 1 // what the member part may take, `_` aside
  if (room >= HASH_CHARS) {
    const keep = Math.max(0, room - HASH_CHARS - 1)
    const part = keep === 0 ? hash : `${member.slice(0, keep)}-${hash}`
    return `${part.slice(0, room)}_${name}`
  }
  // `<member hash>_<name start>-<hash of member and name>`: the NUL keeps `a`+`bc` from `ab`+`c`.
  return `${hash}_${name.slice(0, KEPT)}-${shortHash(`${member}\0${name}`)}`
}

/** Characters of the own name a fully shortened name keeps (prefixedName). */
const KEPT = MAX_NAME - HASH_CHARS - 1 - 1 - HASH_CHARS

/**
 * The start of the own name when `exposed` is a fully shortened name of `member` (prefixedName's
 * last form); the rest of the own name is only in the member's list.
 */
export function shortenedStart(member: string, exposed: string): string | undefined {
  const head = `${shortHash(member)}_`
  if (!exposed.startsWith(head) || exposed.length !== head.length + KEPT + 1 + HASH_CHARS)
    return undefined
  if (exposed[head.length + KEPT] !== '-') return undefined
  return exposed.slice(head.length, head.length + KEPT)
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, HASH_CHARS)
}

/** A name two or more members serve, and what became of it. */
export interface Collision {
  readonly name: string
  readonly members: readonly string[]
  /** `prefixed`: each is reachable as `<member>_<name>`; `unreachable`: `prefix: never`. */
  readonly outcome: 'prefixed' | 'unreachable'
}

/** The exposed names of one kind (tools or prompts) over all members. */
export interface NameTable {
  /** exposed name → member and own name */
  readonly routes: ReadonlyMap<string, NameRoute>
  /** own name per member → exposed name (to rename the items of a list page) */
  readonly exposed: readonly ReadonlyMap<string, string>[]
  readonly collisions: readonly Collision[]
}

/**
 * Decides every exposed name from the names each member serves (`owned[i]` for member i):
 * `always` prefixes all; `onCollision` only names served by two or more members (both then
 * reachable by prefixed name, none shadowing the other); `never` exposes names as they are, and
 * a name served twice is reachable under neither (and reported), never silently one of them.
 */
export function buildNameTable(
  members: readonly string[],
  owned: readonly (ReadonlySet<string> | undefined)[],
  mode: PrefixMode,
): NameTable {
  const servedBy = new Map<string, number[]>()
  owned.forEach((names, i) => {
    for (const n of names ?? []) {
      const list = servedBy.get(n)
      if (list === undefined) servedBy.set(n, [i])
      else list.push(i)
    }
  })
  const routes = new Map<string, NameRoute>()
  const exposed = members.map(() => new Map<string, string>())
  const collisions: Collision[] = []
  /** Exposed names claimed twice (a prefixed name equal to another member's plain one). */
  const clash = new Set<string>()
  const claim = (out: string, member: number, name: string): void => {
    if (routes.has(out)) clash.add(out)
    routes.set(out, { member, name })
    exposed[member]?.set(name, out)
  }
  for (const [name, by] of servedBy) {
    const collides = by.length > 1
    if (collides) {
      collisions.push({
        name,
        members: by.map((i) => members[i] as string),
        outcome: mode === 'never' ? 'unreachable' : 'prefixed',
      })
    }
    if (mode === 'never' && collides) continue
    const prefix = mode === 'always' || collides
    for (const i of by) {
      const member = members[i] as string
      claim(prefix ? prefixedName(member, name) : name, i, name)
    }
  }
  // SECURITY: an exposed name two items would claim routes to neither; a call never reaches a
  // member the client did not mean.
  for (const out of clash) {
    routes.delete(out)
    for (const m of exposed) for (const [k, v] of m) if (v === out) m.delete(k)
  }
  return { routes, exposed, collisions }
}
