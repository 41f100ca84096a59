import type { GcraResult } from './gcra.js'
import type { CompiledLimit, RateSpec } from './rules.js'

/**
 * The IETF rate-limit fields (draft-ietf-httpapi-ratelimit-headers §3, §4), structured-field lists
 * (RFC 9651 §3.1) with one item per rate limit the request counted against:
 * `RateLimit-Policy: "per-user";q=120;w=60` (quota per window) and `RateLimit: "per-user";r=19;t=1`
 * (remaining now; seconds until that changes). Names are sf-strings; the schema limits them to
 * characters that need no escaping.
 */
export function policyItem(name: string, rate: RateSpec): string {
  return `"${name}";q=${rate.count};w=${Math.round(rate.periodMs / 1000)}`
}

export function stateItem(limit: CompiledLimit, r: GcraResult): string {
  const ms = r.allowed ? (r.remaining === 0 ? r.resetMs : 0) : r.retryAfterMs
  return `"${limit.name}";r=${r.remaining};t=${Math.ceil(ms / 1000)}`
}

/** `Retry-After` in whole seconds (RFC 9110 §10.2.3), never 0 for a refusal. */
export function retryAfterSeconds(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)))
}
