import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from '../env.js'

/** Policy on named targets and list filtering (issue 3). Without `policies:` everything passes. */
export const authorize = (): MiddlewareHandler<GatewayEnv> =>
  async function authorize(_c, next) {
    await next()
  }
