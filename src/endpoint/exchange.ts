import type { AuthRuntime } from '../auth/compile.js'
import type { Principal } from '../auth/principal.js'
import { TokenExchangeFailure } from '../auth/token-exchange.js'
import type { UserTokenSource } from '../auth/user-tokens.js'
import { GatewayError } from '../errors.js'
import { UpstreamFailure } from '../upstream/failure.js'
import type { EndpointCall } from './call.js'
import { callerOf, connectAnswer, ownRetry, type ConnectAnswer } from './connect-answers.js'

/**
 * Whether `server` gets upstream credentials of its own (a call then awaits them): an RFC 8693
 * exchanged token (`tokenExchange`) or the user's own token (`userAuth`).
 */
export function exchanges(auth: AuthRuntime | undefined, server: string): boolean {
  const s = auth?.servers.get(server)
  return s !== undefined && (s.exchanger !== undefined || s.userTokens !== undefined)
}

/**
 * The `Authorization` a server gets instead of the caller's: the caller's token traded for one
 * meant for that backend (RFC 8693, `tokenExchange`), or the user's own token at its service
 * (`userAuth`, docs/auth.md §Per-user credentials); undefined for a server with neither. The
 * caller's own token never goes upstream (spec 2026-07-28 §8, security-considerations "Token
 * Passthrough"). One place for a direct request and a virtual server's member requests; a user
 * who has not connected gets an error naming the connect page (the endpoint's send asks in band,
 * `credentialsFor`).
 */
export async function exchangeFor(
  auth: AuthRuntime | undefined,
  server: string,
  principal: Principal | undefined,
): Promise<string | undefined> {
  const s = auth?.servers.get(server)
  const users = s?.userTokens
  if (users !== undefined) {
    // SECURITY: fail closed; the loader refuses userAuth without auth.
    if (principal === undefined) throw new GatewayError('user_connect_required', 'no caller')
    const value = await users.authorization(principal)
    if (value !== undefined) return value
    const url = users.connectUrl(principal)
    throw new GatewayError('user_connect_required', {
      detail: `open ${url} to connect your ${users.service} account`,
      data: { connectUrl: url, server, service: users.service },
    })
  }
  const exchanger = s?.exchanger
  if (exchanger === undefined) return undefined
  // SECURITY: fail closed; the loader already refuses tokenExchange without auth.
  if (principal === undefined) throw new GatewayError('token_exchange_failed', 'no caller token')
  try {
    return `Bearer ${await exchanger.exchange(principal.token)}`
  } catch (err) {
    if (!(err instanceof TokenExchangeFailure)) throw err
    throw new GatewayError('token_exchange_failed', { cause: err })
  }
}

/**
 * The send options with the `Authorization` this server gets. Not `{ ...opts, auth }`: V8 (Node
 * 20) builds a spread followed by a property on its slow path, about 2 µs a call
 * (bench/user-auth.ts); the copy and the one property assigned cost a tenth of that.
 */
export function withAuth<T extends object>(
  opts: T,
  auth: string | undefined,
): T & { readonly auth: string | undefined } {
  return Object.assign({}, opts, { auth })
}

/** What the endpoint's send goes on with: credentials (and the call to send), or an answer. */
export type Credentials =
  | {
      readonly kind: 'send'
      readonly auth: string | undefined
      /** The call, without the gateway's own `requestState` when it is a retry of its prompt. */
      readonly call: EndpointCall
      /** The user's token source, for one refresh on a 401 (`sendAgain`). */
      readonly user: UserTokenSource | undefined
      readonly server: string
    }
  | ConnectAnswer

/**
 * The credentials of one request the endpoint sends (endpoint/endpoint.ts `send`): for a
 * `userAuth` server, the caller's token at the service, or, when the caller has not connected, the
 * in-band prompt to connect (connect-answers.ts): the decision is here, so direct requests and
 * every virtual member request get it alike, and nothing reaches the backend without the token.
 */
export async function credentialsFor(
  auth: AuthRuntime | undefined,
  server: string,
  call: EndpointCall,
): Promise<Credentials> {
  const users = auth?.servers.get(server)?.userTokens
  if (users === undefined) {
    // A token exchange without a caller sends none (the loader refuses tokenExchange without auth).
    if (call.principal === undefined)
      return { kind: 'send', auth: undefined, call, user: undefined, server }
    const value = await exchangeFor(auth, server, call.principal)
    return { kind: 'send', auth: value, call, user: undefined, server }
  }
  const principal = callerOf(call)
  const retry = ownRetry(call, server, users, principal)
  let value = await users.authorization(principal)
  // The user accepted the prompt and may still be at the connect page: wait for it, bounded.
  if (value === undefined && retry.answer === 'accept')
    value = await users.connected(principal, users.connectWaitMs)
  if (value !== undefined)
    return { kind: 'send', auth: value, call: retry.call, user: users, server }
  if (retry.answer === 'decline')
    throw new GatewayError('user_connect_required', {
      detail: `the connection to ${users.service} was declined`,
      data: { server, service: users.service },
    })
  return connectAnswer(retry.call, server, users, principal)
}

/**
 * After a send failed: when the server refused the user's token (HTTP 401 before anything was
 * written, so nothing ran: upstream/proxy-handler.ts), one refresh (single flight per user) and
 * the same request sent once more with it; a second refusal drops the token. A token that is gone
 * after the refusal (no refresh token, `invalid_grant`) asks the user to connect at once. Any
 * other failure is rethrown as it was.
 */
export async function sendAgain<T>(
  err: unknown,
  creds: Extract<Credentials, { kind: 'send' }>,
  send: (auth: string) => Promise<T>,
): Promise<T | ConnectAnswer> {
  const user = creds.user
  if (user === undefined || creds.auth === undefined || !refusedToken(err)) throw err
  const principal = callerOf(creds.call)
  const again = await user.refused(principal, creds.auth)
  if (again === undefined) return connectAnswer(creds.call, creds.server, user, principal)
  try {
    return await send(again)
  } catch (second) {
    if (refusedToken(second)) await user.drop(principal, 'upstream_401')
    throw second
  }
}

function refusedToken(err: unknown): boolean {
  return err instanceof UpstreamFailure && err.status === 401
}
