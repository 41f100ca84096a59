import type { Context, Next } from 'hono'
import { hasQueryToken, readBearer } from '../auth/bearer.js'
import type { AuthRuntime, ServerAuth } from '../auth/compile.js'
import { AuthFailure } from '../auth/failure.js'
import type { ClientGates } from '../match/clients.js'
import type { AuditLog } from '../observability/audit.js'
import type { Principal } from '../auth/principal.js'
import type { Stage } from './chain.js'
import type { GatewayEnv } from './env.js'
import { GatewayError, type ErrorCode } from '../errors.js'

/**
 * Bearer token → Principal (spec 2026-07-28 §8; docs/design/check-order.md step 6). Runs after
 * the front door and before the body is read, so an unauthenticated caller costs no body read.
 * Mounted only with `auth:` configured (app.ts); without it every caller is anonymous. `clients`
 * holds the endpoints' client allowlists (`servers.<name>.clients`, match/clients.ts); a caller
 * they refuse is written to `audit`.
 */
export const authenticate = (auth: AuthRuntime, clients: ClientGates, audit: AuditLog): Stage =>
  function authenticate(c, next) {
    const runtime = c.get('runtime')
    const server = auth.servers.get(c.get('server').name) as ServerAuth
    const { incoming } = c.env
    const head = c.get('head')
    // SECURITY: spec §8: never a token in the URI. Refused even beside a good header token, so a
    // token that proxies on the way have logged never works.
    if (hasQueryToken(incoming.url)) {
      throw refusal(c, 'token_in_query', server.challenges.invalidRequest)
    }
    const bearer = readBearer(head.authorization, runtime.config.limits.maxTokenBytes)
    if (bearer.kind === 'none') throw refusal(c, 'unauthenticated', server.challenges.missing)
    if (bearer.kind === 'malformed') {
      throw refusal(c, 'invalid_token', server.challenges.invalid, bearer.reason)
    }
    // A token checked a moment ago is answered at once (auth/verifier.ts): the stage then decides
    // synchronously and adds no promise of its own.
    const verified = auth.verifier.verify(bearer.token, server.audience)
    const admit = (principal: Principal): ReturnType<Next> => {
      const refused = admission(c, principal, server, clients, audit)
      if (refused !== undefined) throw refused
      c.set('principal', principal)
      return next()
    }
    if (!(verified instanceof Promise)) return admit(verified)
    return verified.then(admit, (err: unknown) => {
      throw verifyFailure(c, err, server)
    })
  }

/** Node would drain an unread body after we answer; closing is the cheap rejection. */
function closeUnread(c: Context<GatewayEnv>): Record<string, string> {
  const unread =
    c.env.incoming.headers['transfer-encoding'] !== undefined ||
    (c.get('head').contentLength ?? 0) > 0
  return unread ? { connection: 'close' } : {}
}

/** A refusal with its challenge (RFC 6750 §3). */
function refusal(
  c: Context<GatewayEnv>,
  code: ErrorCode,
  challenge: string,
  detail?: string,
): GatewayError {
  const headers = { 'www-authenticate': challenge, ...closeUnread(c) }
  return new GatewayError(code, { detail, headers })
}

/** What a failed check becomes: 503 when the keys could not be had, else 401 invalid_token. */
function verifyFailure(c: Context<GatewayEnv>, err: unknown, server: ServerAuth): unknown {
  if (!(err instanceof AuthFailure)) return err
  if (err.kind === 'unavailable') {
    // 503 + Retry-After, not a 401 that makes clients drop good tokens (docs/auth.md).
    const headers = { 'retry-after': String(err.retryAfterSec), ...closeUnread(c) }
    return new GatewayError('auth_unavailable', { cause: err, headers })
  }
  return refusal(c, 'invalid_token', server.challenges.invalid, err.reason)
}

/**
 * The server's own gates for a verified caller: its client applications, then its scopes.
 * Undefined when both let the caller in; otherwise the refusal, written to `audit`.
 */
function admission(
  c: Context<GatewayEnv>,
  principal: Principal,
  server: ServerAuth,
  clients: ClientGates,
  audit: AuditLog,
): GatewayError | undefined {
  const refused = (reason: 'client_not_allowed' | 'insufficient_scope'): void => {
    audit.accessRefused({
      caller: principal,
      requestId: c.get('requestId'),
      server: c.get('server').name,
      method: c.get('head').method,
      target: undefined,
      reason,
    })
  }
  // SECURITY: only the client applications the server names may use it (docs/auth.md §Client
  // applications); no challenge, since another token of the same client would not pass either.
  const client = clients.get(c.get('server').name)
  if (client !== undefined && !client(principal)) {
    refused('client_not_allowed')
    return new GatewayError('client_not_allowed', { headers: closeUnread(c) })
  }
  // Spec §8: 403 insufficient_scope, naming every scope the server needs in one challenge.
  if (server.requiredScopes.some((s) => !principal.scopes.has(s))) {
    refused('insufficient_scope')
    return refusal(c, 'insufficient_scope', server.challenges.insufficientScope)
  }
  return undefined
}
