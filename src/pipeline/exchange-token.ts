import type { MiddlewareHandler } from 'hono'
import { exchangeFor, exchanges } from '../endpoint/exchange.js'
import type { GatewayEnv } from './env.js'

/**
 * Upstream credentials by RFC 8693 token exchange, for servers with `tokenExchange`
 * (endpoint/exchange.ts); proxy sends them instead of the caller's token. Runs last before proxy,
 * so denied calls and cache hits cost no exchange.
 */
export const exchangeToken = (): MiddlewareHandler<GatewayEnv> =>
  async function exchangeToken(c, next) {
    const auth = c.get('runtime').auth
    const server = c.get('server').name
    if (!exchanges(auth, server)) return next()
    c.set('upstreamAuthorization', await exchangeFor(auth, server, c.get('principal')))
    await next()
  }
