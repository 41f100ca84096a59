import { isRecord } from '../mcp/jsonrpc.js'
import { CACHEABLE_METHODS } from '../mcp/methods.js'

/** What the cache config allows beyond public results. */
export interface StoreRules {
  /** `cache.private`: keep `private` results per authorization context. */
  readonly allowPrivate: boolean
  /** `cache.maxTtlMs`: no entry lives longer, whatever the backend says. */
  readonly maxTtlMs: number
}

/** The hints of a result that may be stored, and for how long. */
export interface StoreDecision {
  readonly scope: 'public' | 'private'
  /** ttlMs exactly as the backend sent it. */
  readonly ttlMs: number
  /** How long the entry is fresh here: ttlMs capped by maxTtlMs. */
  readonly lifeMs: number
}

/**
 * Whether a request may be answered from, or written to, the cache at all. caching.mdx §Not
 * cacheable: MRTR retries (`inputResponses`, `requestState`) MUST NOT be cached; they are fresh
 * requests with caller-specific state, even when the method is a list.
 */
export function isCacheableRequest(
  method: string | undefined,
  params: Readonly<Record<string, unknown>> | undefined,
): boolean {
  if (method === undefined || !CACHEABLE_METHODS.has(method)) return false
  if (params === undefined) return true
  // SECURITY: a retry carries state minted for one caller; serving or storing it crosses callers.
  return params.inputResponses === undefined && params.requestState === undefined
}

/**
 * Why an answer of a cacheable request is not kept, for the figures that count it apart from
 * misses (docs/cache.md §What is cached): an error, an MRTR `input_required` result, no usable
 * `ttlMs`, a scope it may not be kept under (`private`, or none: caching.mdx §cacheScope), or too
 * large to keep (`cache.maxEntryBytes`) or to read.
 */
export type UncacheableReason = 'error' | 'incomplete' | 'no_ttl' | 'private' | 'too_large'

/** Why decideStore refused `message` (only meaningful when it did). */
export function uncacheableReason(message: Readonly<Record<string, unknown>>): UncacheableReason {
  const result = message.result
  if ('error' in message || !isRecord(result)) return 'error'
  if (result.resultType !== 'complete') return 'incomplete'
  const ttlMs = result.ttlMs
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs <= 0) return 'no_ttl'
  return 'private'
}

/**
 * Decides whether an upstream's final JSON-RPC response may be stored (caching.mdx):
 * `resultType: "complete"`, an integer `ttlMs` > 0 (0 = immediately stale; missing, negative or
 * fractional values are not trusted), and `cacheScope: "public"`, or `"private"` when per-caller
 * caching is on and the caller has an authorization context. Errors never qualify.
 */
export function decideStore(
  message: Readonly<Record<string, unknown>>,
  rules: StoreRules,
  hasAuthContext: boolean,
): StoreDecision | undefined {
  if ('error' in message) return undefined
  const result = message.result
  if (!isRecord(result)) return undefined
  // MRTR: input_required results carry no caching hints and MUST NOT be cached.
  if (result.resultType !== 'complete') return undefined
  const ttlMs = result.ttlMs
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs <= 0) return undefined
  const scope = result.cacheScope
  // caching.mdx §cacheScope: a missing scope is private; private MUST NOT cross authorization
  // contexts, so without one (no auth configured) it is not stored at all.
  if (scope === 'public') return { scope, ttlMs, lifeMs: Math.min(ttlMs, rules.maxTtlMs) }
  if (scope === 'private' && rules.allowPrivate && hasAuthContext) {
    return { scope, ttlMs, lifeMs: Math.min(ttlMs, rules.maxTtlMs) }
  }
  return undefined
}
