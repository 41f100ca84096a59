import type { IncomingHttpHeaders } from 'node:http'
import type { Principal } from '../auth/principal.js'
import { GatewayError } from '../errors.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import type { McpRequestInfo, McpTarget } from '../mcp/classify.js'
import { chainFilters, type ListFilter } from '../mcp/list-filter.js'
import {
  LIST_METHODS,
  SKILL_ENTRY_METHODS,
  isKnownMethod,
  resemblesKnownMethod,
} from '../mcp/methods.js'
import { SkillAnswers } from '../mcp/skill-answers.js'
import { hasForbiddenNameCharacter, printable, uriProblem } from '../mcp/names.js'
import type { PolicySet } from '../policy/policy.js'
import { EVENT } from '../telemetry/events.js'
import type { RequestTrace } from '../telemetry/request-trace.js'
import { argumentsOf, checkScopes, judge, listView, type JudgeDeps } from './judge.js'
import { decideLimits, limitedMethod, type LimitDeps } from './limit.js'

/** What admission needs of a server (a ServerRuntime has all of it). */
export interface AdmitServer {
  readonly name: string
  readonly config: { readonly extraMethods: readonly string[] }
}

/** The deciders of one app (app.ts): policy, scopes, the audit log, metrics, limits. */
export interface AdmitDeps extends JudgeDeps {
  /** The compiled org-wide allowlist; undefined without `policies:`. */
  readonly policy: PolicySet | undefined
  /** Per-principal limits; undefined when the policy files hold none. */
  readonly limiting: LimitDeps | undefined
  /** Whether `telemetry:` is on: an allowed policy decision is an event on the request's span. */
  readonly tracing: boolean
}

/**
 * One request to one server as admission reads it (an EndpointCall has all of it): a direct
 * request, or one a virtual server makes of a member for its client, with the member's own
 * method and targets.
 */
export interface AdmitCall {
  readonly http: string
  readonly requestId: string
  readonly mcp: Pick<McpRequestInfo, 'era' | 'method' | 'targets' | 'message'>
  readonly principal: Principal | undefined
  readonly peer: string | undefined
  readonly headers: IncomingHttpHeaders
  readonly trace?: RequestTrace | undefined
}

/** The request may go on: what the send needs of what was decided. */
export interface Admitted {
  readonly kind: 'admitted'
  /** The caller's view of a list method's answer (policy, then scopes); undefined: all of it. */
  readonly listFilter: ListFilter | undefined
  /** The RateLimit fields of the limit decision, for the answer (docs/rate-limits.md). */
  readonly limitHeaders: Readonly<Record<string, string>> | undefined
  /** Gives back the concurrency slots taken: once, when the answer has ended. */
  readonly release: (() => void) | undefined
}

/** The request is answered in the server's name and nothing is forwarded. */
interface Refused {
  readonly kind: 'refused'
  /** The denied target, answered as one the server does not have; undefined: an unknown method. */
  readonly target: McpTarget | undefined
  readonly outcome: 'method_not_found' | 'policy_denied'
}

export type Admission = Admitted | Refused

const ADMITTED: Admitted = Object.freeze({
  kind: 'admitted',
  listFilter: undefined,
  limitHeaders: undefined,
  release: undefined,
})
const UNKNOWN_METHOD: Refused = Object.freeze({
  kind: 'refused',
  target: undefined,
  outcome: 'method_not_found',
})
const DENIED_METHOD: Refused = Object.freeze({
  kind: 'refused',
  target: undefined,
  outcome: 'policy_denied',
})

/**
 * Everything the gateway decides about one request to one server, in the order of
 * docs/design/check-order.md, compiled once per server and app: the method gate and
 * `extraMethods`, name characters, the URI normal form, the list view, each named target's scopes
 * then policy (conditions and dry run included, audited and counted), then the rate and
 * concurrency limits. The one door every request to a server passes, whichever endpoint it came
 * through: the direct stage (pipeline/admit.ts) and every virtual handler for its member requests
 * (docs/design/member-path.md). A 400, a 403 with its challenge and a 429 are thrown
 * (GatewayError); a denial is returned, for the caller to answer in the server's name.
 */
export class ServerAdmission {
  /** Whether requests to this server are judged at all: `policies:`, or its own `scopes:`. */
  readonly #judged: boolean
  readonly #extra: Matcher | undefined

  constructor(
    readonly server: AdmitServer,
    readonly deps: AdmitDeps,
  ) {
    this.#judged = deps.policy !== undefined || deps.scopes?.covers(server.name) === true
    const extra = server.config.extraMethods
    this.#extra = extra.length === 0 ? undefined : compilePatterns(extra)
  }

  /**
   * Admits `call` to this server, `endpoint` being where the client sent it (the server, or a
   * virtual server: the 403 challenge names it). Without limits, or refused, it costs no await.
   */
  admit(call: AdmitCall, endpoint: string): Admission | Promise<Admission> {
    let judged = this.#judged ? this.#judge(call, endpoint) : ADMITTED
    if (judged.kind === 'admitted' && SKILL_ENTRY_METHODS.has(call.mcp.method ?? ''))
      judged = withSkillAnswers(call.mcp, judged)
    const limiting = this.deps.limiting
    if (judged.kind === 'refused' || limiting === undefined) return judged
    return this.#limit(limiting, call, judged)
  }

  /** The caller's view of this server's lists (endpoint/judge.ts listView). */
  listView(principal: Principal | undefined): ListFilter | undefined {
    return this.#judged
      ? listView(this.deps.policy, this.deps, principal, this.server.name)
      : undefined
  }

  #judge(call: AdmitCall, endpoint: string): Admission {
    const { mcp, principal } = call
    const method = mcp.method
    let targets: readonly McpTarget[] = mcp.targets
    // SECURITY: a method the gateway does not know could be one a lenient backend maps onto a
    // known one (`TOOLS/CALL`, `tools//call`) and runs unjudged; it is answered as a server that
    // does not know it. In trusted-header mode `method` is the Mcp-Method header the backend checks.
    if (method !== undefined && !isKnownMethod(mcp.era, method)) {
      if (!this.#isExtraMethod(method)) return UNKNOWN_METHOD
      if (hasForbiddenNameCharacter(method)) {
        throw new GatewayError(
          'invalid_name',
          `the method "${printable(method)}" contains a control, bidi or unpaired surrogate character`,
        )
      }
      targets = [{ kind: 'method', name: method }]
    }
    // Policy judges the backend's names, so it filters before a catalog view renames them.
    if (method !== undefined && LIST_METHODS[method] !== undefined) {
      const listFilter = this.listView(principal)
      return listFilter === undefined ? ADMITTED : { ...ADMITTED, listFilter }
    }
    // SECURITY: a URI with dot segments or encoded separators resolves elsewhere at the backend
    // than the text a resource pattern (policy's or `scopes:`) matched (docs/policy.md §Resource
    // URIs); refused before any target is judged, whichever endpoint the request came through.
    for (const target of targets) {
      // A skill is named by its SKILL.md's URI, which resolves at the backend like any resource's.
      const uri =
        target.kind === 'resource' ? target.uri : target.kind === 'skill' ? target.name : undefined
      if (uri === undefined) continue
      const problem = uriProblem(uri)
      if (problem !== undefined)
        throw new GatewayError('uri_not_normalized', `${JSON.stringify(uri)}: ${problem}`)
    }
    const policy = this.deps.policy
    const args = policy === undefined ? undefined : argumentsOf(mcp.message)
    let denied: McpTarget | undefined
    for (const target of targets) {
      // prettier-ignore
      const j = {
        endpoint, server: this.server.name, requestId: call.requestId, principal, method, target, args,
      }
      // The token's scopes for the target first: a 403 the client can step up on (thrown).
      checkScopes(this.deps, j)
      if (policy !== undefined && !judge(policy, this.deps, j).allow) denied ??= target
    }
    if (denied === undefined) {
      if (this.deps.tracing && policy !== undefined)
        call.trace?.event(EVENT.policy, { decision: 'allow' })
      return ADMITTED
    }
    if (denied.kind === 'method') return DENIED_METHOD
    return { kind: 'refused', target: denied, outcome: 'policy_denied' }
  }

  /** The server's limits, counted on its own name and targets (endpoint/limit.ts). */
  async #limit(limiting: LimitDeps, call: AdmitCall, judged: Admitted): Promise<Admission> {
    const req = {
      principal: call.principal,
      peer: call.peer,
      headers: call.headers,
      method: limitedMethod(call.http, call.mcp.method),
    }
    const verdict = await decideLimits(limiting, req, this.server.name, call.mcp.targets)
    return { ...judged, limitHeaders: verdict.headers, release: verdict.release }
  }

  #isExtraMethod(method: string): boolean {
    return this.#extra !== undefined && !resemblesKnownMethod(method) && this.#extra(method)
  }
}

/**
 * A skills answer is checked whatever the policy (mcp/skill-answers.ts): entries within the
 * per-skill limits, and a skills/get answer for the skill that was judged. First, so the caller's
 * view filters what is left.
 */
function withSkillAnswers(mcp: AdmitCall['mcp'], judged: Admitted): Admitted {
  const t = mcp.targets[0]
  const check = new SkillAnswers(t?.kind === 'skill' ? t.name : undefined)
  return { ...judged, listFilter: chainFilters(check, judged.listFilter) }
}
