/**
 * What a server's change notification makes stale (spec 2026-07-28 basic/patterns/subscriptions,
 * caching.mdx §Invalidation), one reading for every reader of change streams: the edge cache, a
 * virtual server's merged lists and name map.
 */
export type Invalidation =
  | { readonly kind: 'tools' | 'prompts' | 'resources' | 'all' }
  | { readonly kind: 'resource'; readonly uri: string }

/** What `method` (a change notification) with `params` makes stale; undefined for any other. */
export function invalidationOf(
  method: unknown,
  params: Readonly<Record<string, unknown>>,
): Invalidation | undefined {
  switch (method) {
    case 'notifications/tools/list_changed':
      return { kind: 'tools' }
    case 'notifications/prompts/list_changed':
      return { kind: 'prompts' }
    case 'notifications/resources/list_changed':
      return { kind: 'resources' }
    case 'notifications/resources/updated':
      return typeof params.uri === 'string'
        ? { kind: 'resource', uri: params.uri }
        : { kind: 'resources' }
    default:
      return undefined
  }
}
