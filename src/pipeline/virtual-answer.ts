import type { Context } from 'hono'
import type { Answer, VirtualContext, VirtualOutcome } from '../virtual/request.js'
import type { GatewayEnv } from './env.js'
import { ALREADY_SENT } from './node-response.js'

/** What a virtual request reads of the runtime of the pipeline serving it. */
export function virtualContext(c: Context<GatewayEnv>): VirtualContext {
  const runtime = c.get('runtime')
  return { policy: runtime.policy, auth: runtime.auth, limits: runtime.config.limits }
}

/** A virtual handler's answer as the stage's: its outcome and replica for the access log and span. */
export function respond(c: Context<GatewayEnv>, out: VirtualOutcome, a: Answer): Response {
  if (out.outcome !== undefined) c.set('outcome', out.outcome)
  if (out.upstreamId !== undefined) c.set('upstreamId', out.upstreamId)
  if (a.kind === 'sent') return ALREADY_SENT
  return c.body(a.body, a.status as 200, { 'content-type': 'application/json' })
}
