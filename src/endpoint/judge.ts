import type { Principal } from '../auth/principal.js'
import type { McpTarget } from '../mcp/classify.js'
import type { JsonRpcMessage } from '../mcp/jsonrpc.js'
import type { AuditLog } from '../observability/audit.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { Decision, PolicySet } from '../policy/policy.js'

/** Where a decision is recorded: the app's one audit log and its metrics. */
export interface JudgeDeps {
  readonly audit: AuditLog
  readonly metrics: GatewayMetrics
}

/**
 * The arguments a request hands its target, from the message classify already parsed (never a
 * second parse): `params.arguments` of tools/call and prompts/get, `params.argument` of
 * completion/complete (spec 2026-07-28 server/tools, server/prompts, server/utilities/completion).
 * Undefined for every other method (resources/read names only its URI) and for a body the gateway
 * did not read (trusted headers; runtime.ts forces the read where arguments are needed).
 */
export function argumentsOf(message: JsonRpcMessage | undefined): unknown {
  const params = message?.params
  if (params === undefined) return undefined
  const method = message?.method
  if (method === 'tools/call' || method === 'prompts/get') return params['arguments']
  if (method === 'completion/complete') return params['argument']
  return undefined
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
  /** The call's arguments (argumentsOf); undefined when the method carries none. */
  args: unknown,
): Decision {
  const decision = policy.check(principal, server, target)
  deps.audit.record({
    caller: principal,
    server,
    method,
    target,
    args,
    decision,
    policy: policy.id,
  })
  // `would_deny` makes a dry-run rollout visible on a dashboard, not only in the audit log.
  const outcome = decision.dryRun ? 'would_deny' : decision.allow ? 'allow' : 'deny'
  deps.metrics.policyDecisions.inc({ server, decision: outcome })
  return decision
}
