import type { Principal } from '../auth/principal.js'
import type { McpTarget } from '../mcp/classify.js'
import type { AuditLog } from '../observability/audit.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { Decision, PolicySet } from '../policy/policy.js'

/** Where a decision is recorded: the app's one audit log and its metrics. */
export interface JudgeDeps {
  readonly audit: AuditLog
  readonly metrics: GatewayMetrics
}

/**
 * One policy decision on one target of one server: checked on the server's own names, audited
 * under the server's name, counted. The same for a direct request and a virtual server's member
 * (docs/virtual-servers.md §Policy: exactly what the member's endpoint would decide).
 */
export function judge(
  policy: PolicySet,
  deps: JudgeDeps,
  principal: Principal | undefined,
  server: string,
  method: string | undefined,
  target: McpTarget,
): Decision {
  const decision = policy.check(principal, server, target)
  deps.audit.record({ caller: principal, server, method, target, decision, policy: policy.id })
  // `would_deny` makes a dry-run rollout visible on a dashboard, not only in the audit log.
  const outcome = decision.dryRun ? 'would_deny' : decision.allow ? 'allow' : 'deny'
  deps.metrics.policyDecisions.inc({ server, decision: outcome })
  return decision
}
