import type { Principal } from '../auth/principal.js'
import { GatewayError } from '../errors.js'
import type { ScopeGate } from '../match/scopes.js'
import type { McpTarget } from '../mcp/classify.js'
import type { JsonRpcMessage } from '../mcp/jsonrpc.js'
import { chainFilters, type ListFilter } from '../mcp/list-filter.js'
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

/** Where a call came in and which server's target it names (the same for a direct request). */
export interface JudgedAt {
  /** The endpoint the client called: the server itself, or a virtual server. */
  readonly endpoint: string
  /** The server whose target it is, by its own names: the endpoint, or a virtual's member. */
  readonly server: string
  /** The client request's id (pipeline/access-log.ts), on each of its audit lines. */
  readonly requestId: string
}

/**
 * Whether a named target may go on, checked in the order of docs/design/check-order.md: the
 * token's scopes for it (a 403 the client can step up on, thrown here), then policy (false: answer
 * as an unknown target). The one check both the direct path (pipeline/authorize.ts) and a virtual
 * server's members (virtual/route.ts) run, so a member's target needs the member's scopes through
 * any endpoint, and the challenge names the endpoint the client can re-authorize for.
 */
export function admit(
  policy: PolicySet | undefined,
  deps: JudgeDeps,
  principal: Principal | undefined,
  at: JudgedAt,
  method: string | undefined,
  target: McpTarget,
  args: unknown,
): boolean {
  const challenge = deps.scopes?.refusal(at.endpoint, at.server, principal?.scopes, target)
  // SECURITY: a call its token has no scope for never reaches policy, the cache or a backend.
  if (challenge !== undefined) {
    if (principal !== undefined) {
      const { requestId, server } = at
      const reason = 'insufficient_scope'
      deps.audit.accessRefused({ caller: principal, requestId, server, method, target, reason })
    }
    throw new GatewayError('insufficient_scope', { headers: { 'www-authenticate': challenge } })
  }
  return policy === undefined || judge(policy, deps, principal, at, method, target, args).allow
}

/**
 * The caller's view of `server`'s lists, consistent with admit(): policy's (on the server's own
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
 * second parse): `params.arguments` of tools/call and prompts/get, `params.argument` of
 * completion/complete (spec 2026-07-28 server/tools, server/prompts, server/utilities/completion).
 * Undefined for every other method (resources/read names only its URI) and for a body the gateway
 * did not read (trusted headers; runtime.ts forces the read where arguments are needed).
 */
export function argumentsOf(message: JsonRpcMessage | undefined): unknown {
  const params = message?.params
  const field = message?.method === undefined ? undefined : ARGUMENT_FIELDS.get(message.method)
  return field === undefined || params === undefined ? undefined : params[field]
}

/** Where each method that carries arguments has them. */
const ARGUMENT_FIELDS: ReadonlyMap<string, string> = new Map([
  ['tools/call', 'arguments'],
  ['prompts/get', 'arguments'],
  ['completion/complete', 'argument'],
])

/**
 * The methods that carry arguments: with `audit.arguments` set their bodies are read even from a
 * server that trusts headers (runtime/runtime.ts), so argumentsOf finds them.
 */
export const ARGUMENT_METHODS: readonly string[] = [...ARGUMENT_FIELDS.keys()]

/**
 * One policy decision on one target of one server: checked on the server's own names, audited
 * under the server's name, counted. The same for a direct request and a virtual server's member
 * (docs/virtual-servers.md §Policy: exactly what the member's endpoint would decide).
 */
export function judge(
  policy: PolicySet,
  deps: JudgeDeps,
  principal: Principal | undefined,
  at: JudgedAt,
  method: string | undefined,
  target: McpTarget,
  /** The call's arguments (argumentsOf); undefined when the method carries none. */
  args: unknown,
): Decision {
  const server = at.server
  const decision = policy.check(principal, server, target, args)
  deps.audit.record({
    caller: principal,
    requestId: at.requestId,
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
