import { isRecord } from '../mcp/jsonrpc.js'
import { LIST_METHODS, type ListItems } from '../mcp/methods.js'
import type { VirtualState, NamedKind, UriKind } from './state.js'

/** A list method's items: where they are in the result, what names them, how it is routed. */
export interface ListSpec {
  readonly key: ListItems['key']
  readonly kind: NamedKind | UriKind
  readonly field: ListItems['field']
}

/**
 * The list methods a virtual server merges: every one the method table lists (mcp/methods.ts)
 * whose items it routes by name or URI, each by the kind its items are (the result key names the
 * kind). skills/list is not merged yet: a virtual server answers it as a method it does not serve.
 */
export const LISTS: Readonly<Record<string, ListSpec>> = Object.freeze(
  Object.assign(
    Object.create(null) as Record<string, ListSpec>,
    Object.fromEntries(
      Object.entries(LIST_METHODS).flatMap(([method, l]) =>
        l.key === 'skills' ? [] : [[method, { ...l, kind: l.key }]],
      ),
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
 * them (an item without an exposed name, unreachable by collision or length, is left out); a URI
 * or template two members serve is listed once, from the member `resources:` routes it to, or not
 * at all (ambiguous, returned so the caller can report it).
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
      for (const item of p.items) {
        const out = exposed?.get(item.name as string)
        if (out === undefined) continue
        items.push(out === item.name ? item : { ...item, name: out })
      }
    }
    return { items, ambiguous }
  }
  const uriKind = spec.kind
  for (const p of pages) {
    for (const item of p.items) {
      const value = item[spec.field] as string
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
