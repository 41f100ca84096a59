import { isRecord } from '../mcp/jsonrpc.js'
import { LIST_ITEMS, type ListFilter } from '../mcp/list-filter.js'
import type { TargetKind } from './compile.js'

/**
 * Which field of a list item policy judges, per list method. Resource templates are judged by
 * their `uriTemplate` string taken literally, braces included, against the resource patterns:
 * `docs://*` and `docs://pages/*` show `docs://pages/{name}`, `docs://readme` does not. Reads
 * of the URIs a template expands to are still checked one by one.
 */
interface ItemField {
  readonly kind: TargetKind
  readonly field: string
}

const ITEM_FIELDS: Readonly<Record<string, ItemField>> = {
  'tools/list': { kind: 'tool', field: 'name' },
  'prompts/list': { kind: 'prompt', field: 'name' },
  'resources/list': { kind: 'resource', field: 'uri' },
  'resources/templates/list': { kind: 'resource', field: 'uriTemplate' },
}

/** The ListFilter of one caller on one server: keeps the items `visible` allows. */
export class RuleListFilter implements ListFilter {
  constructor(
    readonly key: string,
    readonly identityDependent: boolean,
    private readonly visible: (kind: TargetKind, value: string) => boolean,
  ) {}

  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const spec = Object.hasOwn(ITEM_FIELDS, method) ? ITEM_FIELDS[method] : undefined
    const array = Object.hasOwn(LIST_ITEMS, method) ? LIST_ITEMS[method] : undefined
    if (spec === undefined || array === undefined) return { ...result }
    const items = result[array]
    if (!Array.isArray(items)) return { ...result }
    const kept = items.filter((item: unknown) => {
      // SECURITY: an item without a readable name is dropped, never shown unjudged.
      if (!isRecord(item)) return false
      const value = item[spec.field]
      return typeof value === 'string' && this.visible(spec.kind, value)
    })
    return { ...result, [array]: kept }
  }
}
