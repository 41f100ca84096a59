import type { MiddlewareHandler } from 'hono'
import { readBearer, hasQueryToken } from '../auth/bearer.js'
import type { ServerAuth } from '../auth/compile.js'
import { AuthFailure } from '../auth/failure.js'
import type { GatewayEnv } from '../env.js'
import { GatewayError } from '../errors.js'

/**
 * Bearer token → Principal (spec 2026-07-28 §8; reliability.md §0.4 step 5). Runs after the front
 * door and before the body is read, so an unauthenticated caller costs no body read. Without
 * `auth:` configured every caller is anonymous.
 */
export const authenticate = (): MiddlewareHandler<GatewayEnv> =>
  async function authenticate(c, next) {
    const auth = c.var.runtime.auth
    if (auth === undefined) {
      c.set('principal', undefined)
      return next()
    }
    const server = auth.servers.get(c.var.server.name) as ServerAuth
    const incoming = c.env.incoming
    // An unread body would be drained by Node after we answer; close instead (cheap rejection).
    const unread = incoming.headers['transfer-encoding'] !== undefined || (c.var.head.contentLength ?? 0) > 0
    const close = unread ? { connection: 'close' } : {}
    const refuse = (code: 'unauthenticated' | 'invalid_token' | 'token_in_query', challenge: string, detail?: string) =>
      new GatewayError(code, detail, undefined, { headers: { 'www-authenticate': challenge, ...close } })
    // SECURITY: spec §8: tokens never in the URI. Refused even beside a good header token, so a
    // token in a URL (logged by every proxy on the way) never works.
    if (hasQueryToken(incoming.url)) throw refuse('token_in_query', server.challenges.invalidRequest)
    const limits = c.var.runtime.config.limits
    const bearer = readBearer(c.var.head.authorization, limits.maxTokenBytes)
    if (bearer.kind === 'none') throw refuse('unauthenticated', server.challenges.missing)
    if (bearer.kind === 'malformed') throw refuse('invalid_token', server.challenges.invalid, bearer.reason)
    let principal
    try {
      principal = await auth.verifier.verify(bearer.token, server.audience)
    } catch (err) {
      if (!(err instanceof AuthFailure)) throw err
      if (err.kind === 'unavailable') {
        // reliability.md B-20: 503 + Retry-After, not a 401 that makes clients drop good tokens.
        const headers = { 'retry-after': String(err.retryAfterSec), ...close }
        throw new GatewayError('auth_unavailable', undefined, undefined, { cause: err, headers })
      }
      throw refuse('invalid_token', server.challenges.invalid, err.reason)
    }
    // Spec §8: 403 insufficient_scope naming every scope the server needs, in one challenge.
    if (server.requiredScopes.some((s) => !principal.scopes.has(s))) {
      const headers = { 'www-authenticate': server.challenges.insufficientScope, ...close }
      throw new GatewayError('insufficient_scope', undefined, undefined, { headers })
    }
    c.set('principal', principal)
    await next()
  }
