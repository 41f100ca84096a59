import type { IncomingHttpHeaders } from 'node:http'
import type { Principal } from '../auth/principal.js'
import { GatewayError } from '../errors.js'
import type { ClientAddress } from '../limits/client-ip.js'
import type { Limiter, LimitVerdict } from '../limits/limiter.js'
import type { LimitKey } from '../limits/rules.js'
import type { McpTarget } from '../mcp/classify.js'
import type { AuditLog } from '../observability/audit.js'
import type { GatewayMetrics } from '../observability/metrics.js'

/** What limits are applied with: the runtime's one Limiter, the app's audit log and metrics. */
export interface LimitDeps {
  readonly limiter: Limiter
  readonly audit: AuditLog
  readonly metrics: GatewayMetrics
  /** `key: ip`: the client address, through `trustedProxies` only. */
  readonly clientAddress: ClientAddress
  /** The policy id audit lines carry. */
  readonly policyId: string
}

/** The request a limit is decided for: its caller, peer and headers, and what it names. */
export interface LimitedRequest {
  readonly principal: Principal | undefined
  readonly peer: string | undefined
  readonly headers: IncomingHttpHeaders
  readonly method: string | undefined
}

/**
 * The method a request counts as for limits: a 2025-era GET, the client's standalone stream of
 * server messages, counts as the `subscriptions/listen` that replaced it (spec 2026-07-28), on a
 * server's own endpoint as through a virtual server, so `methods: [subscriptions/listen]` holds
 * for both eras.
 */
export function limitedMethod(
  http: string | undefined,
  method: string | undefined,
): string | undefined {
  return method === undefined && http === 'GET' ? 'subscriptions/listen' : method
}

/**
 * Per-principal rate and concurrency limits for one request to one server (docs/rate-limits.md):
 * `server` and `targets` are the server's own, whichever endpoint the request came through (a
 * virtual server passes its member and the member's name). Over a limit it throws 429 with
 * Retry-After and the RateLimit fields, audited and counted, and nothing is forwarded. Under it,
 * the verdict carries the remaining quota's headers and the concurrency slots to give back.
 */
export async function decideLimits(
  deps: LimitDeps,
  req: LimitedRequest,
  server: string,
  targets: readonly McpTarget[],
): Promise<LimitVerdict> {
  const decided = deps.limiter.decide({
    server,
    caller: req.principal,
    method: req.method,
    targets,
    keyValue: (key) => keyValue(deps, req, key),
  })
  const verdict = decided instanceof Promise ? await decided : decided
  const refused = verdict.refused
  if (refused === undefined) return verdict
  const reason = verdict.reason ?? 'rate_limited'
  deps.metrics.rateLimited.inc({ limit: refused.name })
  if (reason === 'rate_limit_table_full')
    deps.metrics.rateLimitTableFull.inc({ limit: refused.name })
  deps.audit.rateLimited({
    caller: req.principal,
    server,
    method: req.method,
    limit: refused.name,
    key: keyText(refused.key),
    reason,
    policy: deps.policyId,
  })
  // SECURITY: refused here; the backend (and the cache) never see the request.
  throw new GatewayError(reason, {
    detail: `limit "${refused.name}"`,
    data: { limit: refused.name },
    headers: verdict.headers,
  })
}

function keyValue(deps: LimitDeps, req: LimitedRequest, key: LimitKey): string {
  switch (key.from) {
    case 'none':
      return ''
    case 'ip':
      return deps.clientAddress(req.peer, scalar(req.headers['x-forwarded-for']))
    case 'header':
      return present(scalar(req.headers[key.name]))
    case 'claim': {
      // Own claims only (a verified token's); a caller without the claim shares one bucket with
      // every other such caller, so leaving a claim out never escapes a limit.
      const claims = req.principal?.claims
      const v =
        claims !== undefined && Object.hasOwn(claims, key.name) ? claims[key.name] : undefined
      return present(typeof v === 'string' || typeof v === 'number' ? String(v) : undefined)
    }
  }
}

/** A present value and a missing one never share a bucket, whatever the value. */
function present(value: string | undefined): string {
  return value === undefined ? '-' : `=${value}`
}

function scalar(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v
}

function keyText(key: LimitKey): string {
  return key.from === 'claim' || key.from === 'header' ? `${key.from}:${key.name}` : key.from
}
