import { ERRORS } from '../errors.js'

/**
 * One vocabulary for what became of a request, read from `mcp_edge_requests_total`'s `outcome`
 * and `status` labels (docs/operations.md §Status page), so the page's columns add up to its
 * request count: every request falls in exactly one cause.
 *
 * - `ok`: the backend answered (a notification accepted included), status below 400;
 * - `cache`: answered from the edge cache (fresh, or stale on a backend's failure);
 * - `denied`: the allowlist or the catalog hid the target (answered as the server would answer an
 *   unknown one, so HTTP 200);
 * - `limited`: a rate, concurrency or stream limit refused it (429);
 * - `refused`: the gateway refused it before any backend saw it (a 4xx of the error table);
 * - `backend`: the backend itself answered with an HTTP error (a -32020 HeaderMismatch 400 …);
 * - `failed`: the gateway could not get an answer (a 5xx of the error table, a broken stream).
 */
export const CAUSES = ['ok', 'cache', 'denied', 'limited', 'refused', 'backend', 'failed'] as const
export type Cause = (typeof CAUSES)[number]

/** Outcomes that are the backend's answer (src/endpoint/send.ts outcomeOf, the virtual stage). */
const ANSWERED: ReadonlySet<string> = new Set([
  'ok',
  'accepted',
  'client_closed',
  'preflight',
  'tasks_list_local',
  'virtual_partial',
])
const FROM_CACHE: ReadonlySet<string> = new Set(['cache_hit', 'cache_stale'])
/** Stream ends that are the gateway's failure though the head said 200 (upstream/forward-types.ts). */
const STREAM_FAILED: ReadonlySet<string> = new Set(['broken', 'drained'])

const errorStatus = (outcome: string): number | undefined =>
  Object.hasOwn(ERRORS, outcome) ? ERRORS[outcome as keyof typeof ERRORS].status : undefined

/**
 * The name an outcome is shown and counted under: `accepted` (a notification a virtual server
 * took) is `ok`, as the direct route counts it; a backend's answer with an HTTP error status is
 * `backend_<status>`; everything else is the outcome label itself (a reason code of the error
 * table, `cache_hit`, `policy_denied`, `catalog_*` …).
 */
export function outcomeName(outcome: string, status: number): string {
  if (!ANSWERED.has(outcome)) return outcome
  if (status >= 400) return `backend_${status}`
  return outcome === 'accepted' ? 'ok' : outcome
}

/** The cause a named outcome (outcomeName) falls in. */
export function causeOf(name: string): Cause {
  if (FROM_CACHE.has(name)) return 'cache'
  if (name.startsWith('backend_')) return 'backend'
  if (ANSWERED.has(name)) return 'ok'
  if (name === 'policy_denied' || name.startsWith('catalog_')) return 'denied'
  if (STREAM_FAILED.has(name)) return 'failed'
  const status = errorStatus(name)
  if (status === 429) return 'limited'
  if (status !== undefined && status >= 500) return 'failed'
  return 'refused'
}

/** What each cause means, as the page's column headers explain it. */
export const CAUSE_TEXT: Readonly<Record<Cause, string>> = {
  ok: 'answered by the backend',
  cache: 'answered from the cache',
  denied: 'hidden or denied by the allowlist or the catalog',
  limited: 'refused by a rate, concurrency or stream limit (429)',
  refused: 'refused by the gateway before any backend (4xx)',
  backend: 'answered by the backend with an HTTP error',
  failed: 'no answer: the backend could not be reached or failed (5xx, broken streams)',
}
