import type { MiddlewareHandler } from 'hono'
import { hasQueryToken, readBearer } from '../auth/bearer.js'
import type { AuthRuntime, ServerAuth } from '../auth/compile.js'
import { AuthFailure } from '../auth/failure.js'
import type { ClientGates } from '../match/clients.js'
import type { AuditLog } from '../observability/audit.js'
import type { GatewayEnv } from './env.js'
import { GatewayError, type ErrorCode } from '../errors.js'

/**
 * Bearer token → Principal (spec 2026-07-28 §8; docs/design/check-order.md step 6). Runs after
 * the front door and before the body is read, so an unauthenticated caller costs no body read.
 * Mounted only with `auth:` configured (app.ts); without it every caller is anonymous. `clients`
 * holds the endpoints' client allowlists (`servers.<name>.clients`, match/clients.ts); a caller
 * they refuse is written to `audit`.
 */
export const authenticate = (
  auth: AuthRuntime,
  clients: ClientGates,
  audit: AuditLog,
): MiddlewareHandler<GatewayEnv> =>
  async function authenticate(c, next) {
    const runtime = c.get('runtime')
    const server = auth.servers.get(c.get('server').name) as ServerAuth
    const { incoming } = c.env
    const head = c.get('head')
    // Node would drain an unread body after we answer; closing is the cheap rejection.
    const unread =
      incoming.headers['transfer-encoding'] !== undefined || (head.contentLength ?? 0) > 0
    const close: Record<string, string> = unread ? { connection: 'close' } : {}
    const refuse = (code: ErrorCode, challenge: string, detail?: string): GatewayError => {
      const headers = { 'www-authenticate': challenge, ...close }
      return new GatewayError(code, { detail, headers })
    }
    // SECURITY: spec §8: never a token in the URI. Refused even beside a good header token, so a
    // token that proxies on the way have logged never works.
    if (hasQueryToken(incoming.url)) {
      throw refuse('token_in_query', server.challenges.invalidRequest)
    }
    const bearer = readBearer(head.authorization, runtime.config.limits.maxTokenBytes)
    if (bearer.kind === 'none') throw refuse('unauthenticated', server.challenges.missing)
    if (bearer.kind === 'malformed') {
      throw refuse('invalid_token', server.challenges.invalid, bearer.reason)
    }
    let principal
    try {
      principal = await auth.verifier.verify(bearer.token, server.audience)
    } catch (err) {
      if (!(err instanceof AuthFailure)) throw err
      if (err.kind === 'unavailable') {
        // 503 + Retry-After, not a 401 that makes clients drop good tokens (docs/auth.md).
        const headers = { 'retry-after': String(err.retryAfterSec), ...close }
        throw new GatewayError('auth_unavailable', { cause: err, headers })
      }
      throw refuse('invalid_token', server.challenges.invalid, err.reason)
    }
    // SECURITY: only the client applications the server names may use it (docs/auth.md §Client
    // applications); no challenge, since another token of the same client would not pass either.
    const client = clients.get(c.get('server').name)
    const refused = (reason: 'client_not_allowed' | 'insufficient_scope'): void => {
      const at = { requestId: c.get('requestId'), server: c.get('server').name }
      audit.accessRefused({
        caller: principal,
        ...at,
        method: head.method,
        target: undefined,
        reason,
      })
    }
    if (client !== undefined && !client(principal)) {
      refused('client_not_allowed')
      throw new GatewayError('client_not_allowed', { headers: close })
    }
    // Spec §8: 403 insufficient_scope, naming every scope the server needs in one challenge.
    if (server.requiredScopes.some((s) => !principal.scopes.has(s))) {
      refused('insufficient_scope')
      throw refuse('insufficient_scope', server.challenges.insufficientScope)
    }
    c.set('principal', principal)
    await next()
  }
