import type { AskServer } from '../client/ask.js'
import { judgeCall } from './probe.js'
import type { ServerCatalog } from './curate.js'
import type { CatalogKind } from './definition.js'

/** A virtual server's member with its catalog view (runtime.ts ServerRuntime has both). */
interface CatalogMember extends AskServer {
  readonly catalog?: ServerCatalog | undefined
}

/**
 * A member's list page, or its discovery result, as its own endpoint shows it (docs/catalog.md
 * §Curation, "Virtual servers"): the virtual server learns and prefixes the curated names, and
 * joins the curated and pinned instructions.
 */
export function memberListView(
  member: CatalogMember,
  method: string,
  result: Record<string, unknown>,
): Record<string, unknown> {
  return member.catalog === undefined ? result : member.catalog.apply(method, result)
}

/**
 * The member's own name for a name its curated list shows (the prefix already off), judged as its
 * own endpoint judges it; undefined when that name is unknown to clients.
 */
export async function memberBackendName(
  member: CatalogMember,
  kind: CatalogKind,
  name: string,
  maxBytes: number,
): Promise<string | undefined> {
  const catalog = member.catalog
  if (catalog === undefined) return name
  const call = {
    kind,
    target: kind === 'tools' ? ('tool' as const) : ('prompt' as const),
    exposed: name,
    path: ['name'],
    header: true,
  }
  const verdict = await judgeCall(member, catalog, call, maxBytes)
  return 'backend' in verdict ? verdict.backend : undefined
}
