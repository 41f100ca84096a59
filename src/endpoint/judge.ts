import type { Principal } from '../auth/principal.js'
import { GatewayError } from '../errors.js'
import type { ScopeGate } from '../auth/scopes.js'
import type { McpTarget } from '../mcp/classify.js'
import type { JsonRpcMessage } from '../mcp/jsonrpc.js'
import { chainFilters, type ListFilter } from '../mcp/list-filter.js'
import { ARGUMENT_FIELDS } from '../mcp/methods.js'
import type { AuditLog } from '../observability/audit.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import { RuleListFilter } from '../policy/list-view.js'
import type { Decision, PolicySet } from '../policy/policy.js'

/** Where a decision is recorded: the app's one audit log and its metrics. */
export interface JudgeDeps {
  readonly audit: AuditLog
  readonly metrics: GatewayMetrics
  /** `servers.<name>.scopes`, compiled per config; undefined when no server has any. */
  readonly scopes?: ScopeGate | undefined
}

/** One named target of one request to one server, as it is judged and audited. */
export interface JudgedTarget {
  /** The endpoint the client called: the server itself, or a virtual server. */
  readonly endpoint: string
  /** The server whose target it is, by its own names: the endpoint, or a virtual's member. */
  readonly server: string
  /** The client request's id (pipeline/access-log.ts), on each of its audit lines. */
  readonly requestId: string
  readonly principal: Principal | undefined
  readonly method: string | undefined
  readonly target: McpTarget
  /** The call's arguments (argumentsOf); undefined when the method carries none. */
  readonly args: unknown
}

/**
 * The token's scopes for one target (docs/auth.md §Scopes per tool): a target the token has no
 * scope for throws the 403 the client can step up on, naming the endpoint it called, audited.
 */
export function checkScopes(deps: JudgeDeps, j: JudgedTarget): void {
  const challenge = deps.scopes?.refusal(j.endpoint, j.server, j.principal?.scopes, j.target)
  if (challenge === undefined) return
  if (j.principal !== undefined) {
    const { requestId, server, method, target } = j
    const reason = 'insufficient_scope'
    deps.audit.accessRefused({ caller: j.principal, requestId, server, method, target, reason })
  }
  // SECURITY: a call its token has no scope for never reaches policy, the cache or a backend.
  throw new GatewayError('insufficient_scope', { headers: { 'www-authenticate': challenge } })
}

/**
 * One policy decision on one target of one server: checked on the server's own names, audited
 * under the server's name, counted. Called by admission alone (endpoint/admit.ts), whichever
 * endpoint the request came through.
 */
export function judge(policy: PolicySet, deps: JudgeDeps, j: JudgedTarget): Decision {
  const { server, target, args, principal } = j
  const decision = policy.check(principal, server, target, args)
  deps.audit.record({
    caller: principal,
    requestId: j.requestId,
    server,
    method: j.method,
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

/**
 * The caller's view of `server`'s lists, consistent with admission: policy's (on the server's own
 * names), then, unless `scopesInLists: stepUp`, without what its scopes cannot call. The scope
 * view depends on the token, so it is identity-dependent: a filtered answer is private and cached
 * per scope set (mcp/list-filter.ts, cache/edge-cache.ts render).
 */
export function listView(
  policy: PolicySet | undefined,
  deps: JudgeDeps,
  principal: Principal | undefined,
  server: string,
): ListFilter | undefined {
  const byPolicy = policy?.listFilter(principal, server)
  const byScopes = deps.scopes?.listView(server, principal?.scopes)
  return chainFilters(
    byPolicy,
    byScopes && new RuleListFilter(byScopes.key, true, byScopes.visible),
  )
}

/**
 * The arguments a request hands its target, from the message classify already parsed (never a
 * second parse), where the method table says they sit (mcp/methods.ts `arguments`). Undefined for
 * every other method (resources/read names only its URI) and for a body the gateway did not read
 * (trusted headers; runtime.ts forces the read where arguments are needed).
 */
export function argumentsOf(message: JsonRpcMessage | undefined): unknown {
  const params = message?.params
  const field = message?.method === undefined ? undefined : ARGUMENT_FIELDS.get(message.method)
  return field === undefined || params === undefined ? undefined : params[field]
}
