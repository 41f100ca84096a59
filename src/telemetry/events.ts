import type { Attributes } from '@opentelemetry/api'

/** Span event names (docs/operations.md "Traces"). */
export const EVENT = {
  auth: 'mcp_edge.auth',
  policy: 'mcp_edge.policy',
  cache: 'mcp_edge.cache',
  attempt: 'mcp_edge.upstream.attempt',
  /** One member of a virtual server's fan-out (discovery, lists). */
  member: 'mcp_edge.virtual.member',
} as const

const AUTH_REFUSALS: ReadonlySet<string> = new Set([
  'unauthenticated',
  'invalid_token',
  'insufficient_scope',
  'auth_unavailable',
  'token_in_query',
])

/**
 * The event for a stage that answered the request itself (a refusal, a cache hit); stages that let
 * it through are marked as it passes (pipeline/trace.ts traceMark).
 */
export function outcomeEvent(outcome: string): [string, Attributes] | undefined {
  if (AUTH_REFUSALS.has(outcome)) return [EVENT.auth, { result: outcome }]
  if (outcome === 'policy_denied') return [EVENT.policy, { decision: 'deny' }]
  if (outcome === 'cache_hit') return [EVENT.cache, { result: 'hit' }]
  if (outcome === 'cache_stale') return [EVENT.cache, { result: 'stale' }]
  return undefined
}
