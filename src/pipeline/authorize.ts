import type { Context } from 'hono'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import type { McpRequestInfo, McpTarget } from '../mcp/classify.js'
import { peekRawId } from '../mcp/jsonrpc.js'
import { chainFilters } from '../mcp/list-filter.js'
import { LIST_METHODS, isKnownMethod, resemblesKnownMethod } from '../mcp/methods.js'
import { hasForbiddenNameCharacter, printable, uriProblem } from '../mcp/names.js'
import { admit, argumentsOf, listView, type JudgeDeps } from '../endpoint/judge.js'
import { renderDenial } from '../policy/denial.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import type { PolicySet } from '../policy/policy.js'
import type { Stage } from './chain.js'

/**
 * Scopes and policy on named targets (endpoint/judge.ts admit). Only methods the protocol defines
 * (or the server's `extraMethods`) pass; every target a request names is checked and audited; a
 * target the token has no scope for is a 403 the client can step up on; a denial is answered
 * here, as an unknown target, and the backend receives nothing. List methods get the caller's
 * list filter, which the proxy and the cache apply to the answer. Mounted when `policies:` or
 * some server's `scopes:` are configured (app.ts). `policy` is the pipeline's runtime's: a policy
 * reload makes a new runtime, and so a new pipeline.
 */
export const authorize = (policy: PolicySet | undefined, deps: JudgeDeps): Stage => {
  return function authorize(c, next) {
    const mcp = c.get('mcp')
    const principal = c.get('principal')
    const serverRuntime = c.get('server')
    const server = serverRuntime.name
    // Mounted for scopes alone: a server without `scopes:` is then not judged at all, as without
    // this stage (its unknown methods pass, as they do with no policies).
    if (policy === undefined && deps.scopes?.covers(server) !== true) return next()
    const method = mcp.method
    let targets: readonly McpTarget[] = mcp.targets
    // SECURITY: a method the gateway does not know could be one a lenient backend maps onto a
    // known one (`TOOLS/CALL`, `tools//call`) and runs unjudged; it is answered as a server that
    // does not know it. In trusted-header mode `method` is the Mcp-Method header the backend checks.
    if (method !== undefined && !isKnownMethod(mcp.era, method)) {
      if (!isExtraMethod(serverRuntime.config.extraMethods, method)) return methodNotFound(c, mcp)
      if (hasForbiddenNameCharacter(method)) {
        throw new GatewayError(
          'invalid_name',
          `the method "${printable(method)}" contains a control, bidi or unpaired surrogate character`,
        )
      }
      targets = [{ kind: 'method', name: method }]
    }
    if (method !== undefined && LIST_METHODS[method] !== undefined) {
      // Policy judges the backend's names, so it filters before a catalog view renames them.
      c.set(
        'listFilter',
        chainFilters(listView(policy, deps, principal, server), c.get('listFilter')),
      )
      return next()
    }
    // SECURITY: a URI with dot segments or encoded separators resolves elsewhere at the backend
    // than the text a resource pattern (policy's or `scopes:`) matched (docs/policy.md §Resource URIs).
    for (const target of targets) {
      if (target.kind !== 'resource') continue
      const problem = uriProblem(target.uri)
      if (problem !== undefined)
        throw new GatewayError('uri_not_normalized', `${JSON.stringify(target.uri)}: ${problem}`)
    }
    // Targets come only from a verified body or a trusted backend's header (classify stage).
    let denied: McpTarget | undefined
    const args = argumentsOf(mcp.message)
    const at = { endpoint: server, server, requestId: c.get('requestId') }
    for (const target of targets) {
      if (!admit(policy, deps, principal, at, method, target, args)) denied ??= target
    }
    if (denied === undefined) return next()
    if (denied.kind === 'method') return methodNotFound(c, mcp, 'policy_denied')
    c.set('outcome', 'policy_denied')
    // A notification gets no answer (JSON-RPC 2.0 §4.1); 202 is what a server sends for one.
    if (mcp.kind === 'notification') return c.body(null, 202)
    const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
    const body = renderDenial(denied, rawId ?? 'null')
    return c.body(body, 200, { 'content-type': 'application/json' })
  }
}

/** Compiled `extraMethods` per server config (the array is replaced whenever the config is). */
const extraMatchers = new WeakMap<readonly string[], Matcher>()

function isExtraMethod(patterns: readonly string[], method: string): boolean {
  if (patterns.length === 0 || resemblesKnownMethod(method)) return false
  let matcher = extraMatchers.get(patterns)
  if (matcher === undefined) {
    matcher = compilePatterns(patterns)
    extraMatchers.set(patterns, matcher)
  }
  return matcher(method)
}

/**
 * What a server answers for a method it does not implement, with no gateway marker: 2026-07-28
 * servers HTTP 404 with -32601 (streamable-http §Error Handling); 2025-era servers -32601 in band
 * (JSON-RPC 2.0 §5.1), here as HTTP 200 JSON. A notification gets 202 and no body, as any server
 * answers one, whatever its method. Nothing is forwarded.
 */
function methodNotFound(
  c: Context<GatewayEnv>,
  mcp: McpRequestInfo,
  outcome = 'method_not_found',
): Response {
  c.set('outcome', outcome)
  const rawId = mcp.message?.rawId ?? peekRawId(c.get('body'))
  // Unparsed (trusted-header mode): no readable id means no answer is expected.
  if (mcp.kind === 'notification' || (mcp.kind === 'unknown' && rawId === undefined))
    return c.body(null, 202)
  const body = `{"jsonrpc":"2.0","id":${rawId ?? 'null'},"error":{"code":-32601,"message":"Method not found"}}`
  return c.body(body, mcp.era === 'modern' ? 404 : 200, { 'content-type': 'application/json' })
}
