import type { AuthRuntime } from '../auth/compile.js'
import type { Principal } from '../auth/principal.js'
import { TokenExchangeFailure } from '../auth/token-exchange.js'
import { GatewayError } from '../errors.js'

/** Whether `server` gets its upstream credentials by token exchange (a call then awaits one). */
export function exchanges(auth: AuthRuntime | undefined, server: string): boolean {
  return auth?.servers.get(server)?.exchanger !== undefined
}

/**
 * The `Authorization` a server gets by RFC 8693 token exchange, for servers with `tokenExchange`:
 * the caller's token traded for one meant for that backend; undefined for a server without it.
 * The caller's own token never goes upstream (spec 2026-07-28 §8, security-considerations "Token
 * Passthrough"). One place for a direct request and a virtual server's member requests.
 */
export async function exchangeFor(
  auth: AuthRuntime | undefined,
  server: string,
  principal: Principal | undefined,
): Promise<string | undefined> {
  const exchanger = auth?.servers.get(server)?.exchanger
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
