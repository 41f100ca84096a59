import type { VirtualState } from './state.js'

/** Where a resource URI goes: one member, nobody known, or several without a `resources:` route. */
export type ResourceRoute =
  | { readonly kind: 'member'; readonly member: number }
  | { readonly kind: 'unknown' }
  | { readonly kind: 'ambiguous'; readonly members: readonly number[] }

/**
 * Routes a URI (resources/read) or a template (a completion's `ref/resource`) to the member that
 * serves it (docs/virtual-servers.md §Routing): a URI a list named, else a `resources:` pattern,
 * else the templates it matches. Two owners and no configured route is ambiguous, never a guess.
 */
export function routeResource(
  uri: string,
  state: VirtualState,
  configured: (uri: string) => number | undefined,
): ResourceRoute {
  const direct = unique([
    ...state.ownersOf('resources', uri),
    ...state.ownersOf('resourceTemplates', uri),
  ])
  const decide = (owners: readonly number[]): ResourceRoute | undefined => {
    if (owners.length === 1) return { kind: 'member', member: owners[0] as number }
    if (owners.length > 1) {
      const m = configured(uri)
      return m !== undefined && owners.includes(m)
        ? { kind: 'member', member: m }
        : { kind: 'ambiguous', members: owners }
    }
    return undefined
  }
  const byList = decide(direct)
  if (byList !== undefined) return byList
  const m = configured(uri)
  if (m !== undefined) return { kind: 'member', member: m }
  const matching: number[] = []
  for (const [template, owners] of state.templates())
    if (matchesTemplate(template, uri)) matching.push(...owners)
  return decide(unique(matching)) ?? { kind: 'unknown' }
}

function unique(xs: readonly number[]): number[] {
  return [...new Set(xs)]
}

const compiled = new Map<string, RegExp>()

/**
 * Whether `uri` could be an expansion of an RFC 6570 template: literal parts match exactly, each
 * `{…}` expression matches any non-empty run. Looser than RFC 6570 §3.2 per operator, which only
 * matters when two members' templates overlap, and then `resources:` decides.
 */
export function matchesTemplate(template: string, uri: string): boolean {
  let re = compiled.get(template)
  if (re === undefined) {
    const source = template
      .split(/\{[^}]*\}/)
      .map((lit) => lit.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('.+')
    re = new RegExp(`^${source}$`, 's')
    if (compiled.size > 10_000) compiled.clear()
    compiled.set(template, re)
  }
  return re.test(uri)
}
