import { isRecord } from './jsonrpc.js'
import type { ResultHook } from './result-transform.js'

/** The list methods whose items policy filters (one table: methods.ts). */

/**
 * A caller's view of list results, set by the authorize stage for list methods when a policy
 * applies. The same filter is applied to upstream answers and to cache hits.
 */
export interface ListFilter {
  /** Equal keys filter identically (e.g. the set of rules that matched), so the cache can keep filtered bytes. */
  readonly key: string
  /** True when the outcome depends on who the caller is: the answer must then be `private`. */
  readonly identityDependent: boolean
  /** Returns a copy of `result` without the items the caller may not use. */
  apply(method: string, result: Readonly<Record<string, unknown>>): Record<string, unknown>
}

/**
 * Applies a filter to a JSON-RPC response message. caching.mdx §cacheScope: a filtered list that
 * varies per user is private, so an identity-dependent filter downgrades `public` to `private`.
 */
export function filterMessage(
  filter: ListFilter,
  method: string,
  message: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  const result = message.result
  if (!isRecord(result)) return undefined
  const filtered = filter.apply(method, result)
  if (filter.identityDependent && filtered.cacheScope === 'public') filtered.cacheScope = 'private'
  return { ...message, result: filtered }
}

/** The result hook form of a filter, run last so caches capture the unfiltered answer. */
export function listFilterHook(filter: ListFilter, method: string): ResultHook {
  return (message) => filterMessage(filter, method, message)
}

/**
 * `first`, then `then` on what it kept: policy (which judges the backend's own names) before the
 * catalog view (which renames them; docs/catalog.md §Curation). Either may be absent.
 */
export function chainFilters(
  first: ListFilter | undefined,
  then: ListFilter | undefined,
): ListFilter | undefined {
  if (first === undefined) return then
  if (then === undefined) return first
  return {
    key: `${first.key}>${then.key}`,
    identityDependent: first.identityDependent || then.identityDependent,
    apply: (method, result) => then.apply(method, first.apply(method, result)),
  }
}
