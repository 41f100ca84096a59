import type { MiddlewareHandler } from 'hono'
import type { GatewayEnv } from '../env.js'

/** Edge cache of public list results (issue 4). Without `cache:` every request goes upstream. */
export const listCache = (): MiddlewareHandler<GatewayEnv> =>
  async function listCache(_c, next) {
    await next()
  }
