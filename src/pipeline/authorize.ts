import type { MiddlewareHandler } from 'hono'
import type { Logger } from 'pino'
import type { GatewayEnv } from '../env.js'
import { peekRawId } from '../mcp/jsonrpc.js'
import { LIST_ITEMS } from '../mcp/list-filter.js'
import type { McpTarget } from '../mcp/classify.js'
import { createAuditLog } from '../observability/audit.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import { renderDenial } from '../policy/denial.js'
import { policyTargets } from '../policy/targets.js'

/**
 * Policy on named targets (issue 3). Every target a request names is checked and audited; a
 * denial is answered here, as an unknown target, and the backend receives nothing. List methods
 * get the caller's list filter, which the proxy and the cache apply to the answer.
 * Without `policies:` everything passes.
 */
export const authorize = (log: Logger, metrics: GatewayMetrics): MiddlewareHandler<GatewayEnv> => {
  const audit = createAuditLog(log)
  return async function authorize(c, next) {
    const runtime = c.get('runtime')
    const policy = runtime.policy
    if (policy === undefined) return next()
    const mcp = c.get('mcp')
    const principal = c.get('principal')
    const server = c.get('server').name
    const method = mcp.method
    if (method !== undefined && Object.hasOwn(LIST_ITEMS, method)) {
      c.set('listFilter', policy.listFilter(principal, server))
      return next()
    }
    // Targets come only from a verified body or a trusted backend's header (classify stage).
    let denied: McpTarget | undefined
    for (const target of policyTargets(mcp.targets, mcp.message)) {
      const decision = policy.check(principal, server, target)
      audit.record({ caller: principal, server, method, target, decision, policy: policy.id })
      // `would_deny` makes a dry-run rollout visible on a dashboard, not only in the audit log.
      const outcome = decision.dryRun ? 'would_deny' : decision.allow ? 'allow' : 'deny'
      metrics.policyDecisions.inc({ server, decision: outcome })
      if (!decision.allow) denied ??= target
    }
    if (denied === undefined) return next()
    c.set('outcome', 'policy_denied')
    // A notification gets no answer (JSON-RPC 2.0 §4.1); 202 is what a server sends for one.
    if (mcp.kind === 'notification') return c.body(null, 202)
    const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
    const body = renderDenial(denied, rawId ?? 'null')
    return c.body(body, 200, { 'content-type': 'application/json' })
  }
}
