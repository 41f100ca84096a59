import type { MiddlewareHandler } from 'hono'
import { TokenExchangeFailure } from '../auth/token-exchange.js'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'

/**
 * Upstream credentials by RFC 8693 token exchange, for servers with `tokenExchange`: the caller's
 * token is traded for one meant for that backend, which proxy sends instead. The caller's own
 * token never goes upstream (spec 2026-07-28 §8, security-considerations "Token Passthrough").
 * Runs last before proxy, so denied calls and cache hits cost no exchange.
 */
export const exchangeToken = (): MiddlewareHandler<GatewayEnv> =>
  async function exchangeToken(c, next) {
    const exchanger = c.get('runtime').auth?.servers.get(c.get('server').name)?.exchanger
    if (exchanger === undefined) return next()
    const principal = c.get('principal')
    // SECURITY: fail closed; the loader already refuses tokenExchange without auth.
    if (principal === undefined) throw new GatewayError('token_exchange_failed', 'no caller token')
    let token: string
    try {
      token = await exchanger.exchange(principal.token)
    } catch (err) {
      if (!(err instanceof TokenExchangeFailure)) throw err
      throw new GatewayError('token_exchange_failed', { cause: err })
    }
    c.set('upstreamAuthorization', `Bearer ${token}`)
    await next()
  }
