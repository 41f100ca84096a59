import { scopesOf } from '../auth/verifier.js'
import type { GatewayConfig } from '../config/schema.js'
import { ServerAdmission } from '../endpoint/admit.js'
import { GatewayError } from '../errors.js'
import type { PolicyCaller } from '../match/claims.js'
import { ScopeGate } from '../auth/scopes.js'
import type { McpTarget } from '../mcp/classify.js'
import { ARGUMENT_FIELDS } from '../mcp/methods.js'
import type { AuditLog } from '../observability/audit.js'
import { createMetrics } from '../observability/metrics.js'
import type { Decision, PolicySet } from '../policy/policy.js'

/** What `serve` would decide of one target, as `mcp-edge explain` shows it. */
export type ServeVerdict =
  /** The token lacks a scope the target needs: 403 `insufficient_scope`. */
  | { readonly kind: 'insufficient_scope' }
  /** Refused before policy for another reason (a URI not in normal form, a name's characters). */
  | { readonly kind: 'refused'; readonly code: string }
  /** Policy's decision; undefined without `policies:` (then admitted). */
  | { readonly kind: 'decided'; readonly decision: Decision | undefined }

/** The method a target is called with (what admission judges it under). */
function methodOf(target: McpTarget): string {
  switch (target.kind) {
    case 'tool':
      return 'tools/call'
    case 'prompt':
      return 'prompts/get'
    case 'resource':
      return 'resources/read'
    case 'event':
      return 'events/poll'
    case 'skill':
      return 'skills/get'
    case 'method':
      return target.name
  }
}

/**
 * The token's scopes as the gateway's verifier reads them: `--scopes` when given, else the
 * `scope` / `scp` claims of `--claims` (auth/verifier.ts scopesOf); undefined: an anonymous caller.
 */
export function heldScopes(
  scopes: ReadonlySet<string> | undefined,
  caller: PolicyCaller | undefined,
): ReadonlySet<string> | undefined {
  return scopes ?? (caller === undefined ? undefined : scopesOf(caller.claims))
}

/**
 * Asks the admission `serve` runs (endpoint/admit.ts) about one call of `target` of `server`
 * through `endpoint` (the server, or a virtual server it is a member of), without sending
 * anything, so explain cannot disagree with the gateway: the same scope gate, URI rules, policy
 * and conditions. An anonymous caller without `--scopes` is not scope-checked (a gateway with
 * auth never admits one).
 */
export function admitLikeServe(
  config: GatewayConfig,
  policy: PolicySet | undefined,
  endpoint: string,
  server: string,
  target: McpTarget,
  caller: PolicyCaller | undefined,
  args: unknown,
  scopes: ReadonlySet<string> | undefined,
): ServeVerdict {
  let decision: Decision | undefined
  const audit: AuditLog = {
    record: (entry) => void (decision = entry.decision),
    rateLimited: () => undefined,
    accessRefused: () => undefined,
    drift: () => undefined,
  }
  const held = heldScopes(scopes, caller)
  const gate = held === undefined ? undefined : ScopeGate.offline(config)
  const serverConfig = config.servers[server]
  const admission = new ServerAdmission(
    { name: server, config: { extraMethods: serverConfig?.extraMethods ?? [] } },
    {
      audit,
      metrics: createMetrics(false),
      scopes: gate,
      policy,
      limiting: undefined,
      tracing: false,
    },
  )
  const method = methodOf(target)
  const field = ARGUMENT_FIELDS.get(method)
  const params = field === undefined || args === undefined ? {} : { [field]: args }
  const principal =
    caller === undefined && held === undefined
      ? undefined
      : {
          subject: caller?.subject ?? '',
          issuer: caller?.issuer ?? '',
          claims: caller?.claims ?? {},
          scopes: held ?? new Set<string>(),
          token: '',
        }
  try {
    const admitted = admission.admit(
      {
        http: 'POST',
        requestId: 'explain',
        mcp: {
          era: 'modern',
          method,
          targets: [target],
          message: { kind: 'request', method, params, rawId: '1' },
        },
        principal,
        peer: undefined,
        headers: {},
      },
      endpoint,
    )
    if (admitted instanceof Promise) throw new Error('explain admits without limits')
    if (admitted.kind === 'refused' && admitted.outcome === 'method_not_found')
      return { kind: 'refused', code: 'method_not_found' }
    return { kind: 'decided', decision }
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err
    if (err.code === 'insufficient_scope') return { kind: 'insufficient_scope' }
    return { kind: 'refused', code: err.code }
  }
}
