import { isRecord } from '../mcp/jsonrpc.js'
import { LIST_METHODS, type ListItems } from '../mcp/methods.js'
import { withExposedApp } from './apps.js'
import type { VirtualState, ListKind } from './state.js'

/** A list method's items: where they are in the result, what names them, how it is routed. */
export interface ListSpec {
  readonly key: ListItems['key']
  readonly kind: ListKind
  readonly field: ListItems['field']
}

/**
 * The list methods a virtual server merges: every one the method table lists (mcp/methods.ts),
 * each routed by the kind its items are (the result key names the kind).
 */
export const LISTS: Readonly<Record<string, ListSpec>> = Object.freeze(
  Object.assign(
    Object.create(null) as Record<string, ListSpec>,
    Object.fromEntries(
      Object.entries(LIST_METHODS).map(([method, l]) => [method, { ...l, kind: l.key }]),
    ),
  ),
)

/** The items of one member's list result (records with a string identifying field). */
export function itemsOf(
  spec: ListSpec,
  result: Readonly<Record<string, unknown>>,
): Record<string, unknown>[] {
  const items = result[spec.key]
  if (!Array.isArray(items)) return []
  return items.filter(
    (x): x is Record<string, unknown> => isRecord(x) && typeof x[spec.field] === 'string',
  )
}

/** One member's page, already filtered by that member's policy. */
export interface MemberPage {
  readonly member: number
  readonly items: readonly Record<string, unknown>[]
}

/**
 * The items of a merged page, in member order: tool, prompt and event names as the name table exposes
 * them (an item without an exposed name, unreachable by collision or length, is left out), and a
 * tool's app resource as the virtual server names it; skills, and the resources under a renamed
 * root (a skill's files, an app's `ui://` resource), under their exposed URIs (uri-names.ts);
 * another URI or template two members serve is listed once, from the member `resources:` routes
 * it to, or not at all (ambiguous, returned so the caller can report it).
 */
export function mergeItems(
  spec: ListSpec,
  pages: readonly MemberPage[],
  state: VirtualState,
  resourceRoute: (uri: string) => number | undefined,
): { items: Record<string, unknown>[]; ambiguous: string[] } {
  const items: Record<string, unknown>[] = []
  const ambiguous: string[] = []
  if (spec.kind === 'tools' || spec.kind === 'prompts' || spec.kind === 'events') {
    const table = state.table(spec.kind)
    for (const p of pages) {
      const exposed = table.exposed[p.member]
      const expose = (uri: string): string | undefined => state.exposeUri(p.member, uri)
      for (const item of p.items) {
        const out = exposed?.get(item.name as string)
        if (out === undefined) continue
        const named = out === item.name ? item : { ...item, name: out }
        items.push(spec.kind === 'tools' ? withExposedApp(named, expose) : named)
      }
    }
    return { items, ambiguous }
  }
  if (spec.kind === 'skills') {
    for (const p of pages)
      for (const item of p.items) {
        const shown = exposedSkill(item, (uri) => state.exposeUri(p.member, uri))
        if (shown !== undefined) items.push(shown)
      }
    return { items, ambiguous }
  }
  const uriKind = spec.kind
  for (const p of pages) {
    for (const item of p.items) {
      const value = item[spec.field] as string
      // Under a renamed root the exposed URI is this member's alone: no owner to choose.
      if (spec.kind === 'resources' && state.underRoot(p.member, value)) {
        const exposed = state.exposeUri(p.member, value)
        if (exposed !== undefined) items.push(exposed === value ? item : { ...item, uri: exposed })
        continue
      }
      const owners = state.ownersOf(uriKind, value)
      if (owners.length > 1) {
        const routed = resourceRoute(value)
        if (routed === undefined) {
          if (!ambiguous.includes(value)) ambiguous.push(value)
          continue
        }
        if (routed !== p.member) continue
      }
      items.push(item)
    }
  }
  return { items, ambiguous }
}

/**
 * A member's skill entry as the virtual server lists it: its `uri` and every file's under the
 * exposed root (a skill's identity is the pair of server and URI, skills.mdx §Skill URIs, so each
 * member's is its own); undefined when the skill is reachable under no name, or lists a file
 * outside its own directory (§Resources: every file is within it), which could not be routed.
 */
function exposedSkill(
  item: Readonly<Record<string, unknown>>,
  expose: (uri: string) => string | undefined,
): Record<string, unknown> | undefined {
  const uri = expose(item.uri as string)
  if (uri === undefined) return undefined
  const files = item.resources
  if (!Array.isArray(files)) return uri === item.uri ? { ...item } : { ...item, uri }
  const out: Record<string, unknown>[] = []
  const dir = uri.slice(0, uri.lastIndexOf('/') + 1)
  for (const f of files as unknown[]) {
    if (!isRecord(f) || typeof f.uri !== 'string') return undefined
    const shown = expose(f.uri)
    if (shown === undefined || !shown.startsWith(dir)) return undefined
    out.push(shown === f.uri ? f : { ...f, uri: shown })
  }
  return { ...item, uri, resources: out }
}
