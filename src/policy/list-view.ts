import { isRecord } from '../mcp/jsonrpc.js'
import type { ListFilter } from '../mcp/list-filter.js'
import { LIST_METHODS, type ListItems } from '../mcp/methods.js'
import type { TargetKind } from './compile.js'

/**
 * Policy's target kind of each list's items; mcp/methods.ts says which field names them. Resource
 * templates are judged by their `uriTemplate` string taken literally, braces included, against the
 * resource patterns: `docs://*` and `docs://pages/*` show `docs://pages/{name}`, `docs://readme`
 * does not. Reads of the URIs a template expands to are still checked one by one.
 */
const KIND_OF: Readonly<Record<ListItems['key'], TargetKind>> = {
  tools: 'tool',
  prompts: 'prompt',
  resources: 'resource',
  resourceTemplates: 'resource',
  events: 'event',
  skills: 'skill',
}

/** The ListFilter of one caller on one server: keeps the items `visible` allows. */
export class RuleListFilter implements ListFilter {
  constructor(
    readonly key: string,
    readonly identityDependent: boolean,
    private readonly visible: (kind: TargetKind, value: string) => boolean,
  ) {}

  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const spec = LIST_METHODS[method]
    if (spec === undefined) return { ...result }
    const array = spec.key
    const kind = KIND_OF[array]
    const items = result[array]
    if (!Array.isArray(items)) return { ...result }
    const kept = items.filter((item: unknown) => {
      // SECURITY: an item without a readable name is dropped, never shown unjudged.
      if (!isRecord(item)) return false
      const value = item[spec.field]
      return typeof value === 'string' && this.visible(kind, value)
    })
    return { ...result, [array]: kept }
  }
}
