import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from '../env.js'

/** Bearer token → Principal (issue 3). Without `auth:` configured every caller is anonymous. */
export const authenticate = (): MiddlewareHandler<GatewayEnv> =>
  async function authenticate(c, next) {
    c.set('principal', undefined)
    await next()
  }
