import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import type { Context } from 'hono'
import type { GatewayEnv } from '../env.js'

/**
 * hono's escape hatches, in one module. hono composes the stages and routes, but the answers that
 * matter for speed (forwarded ones, cache hits) are written straight into Node's ServerResponse,
 * without a web Response (docs/design/hot-path.md). Stages that do so must tell hono and
 * @hono/node-server that the response is already written; how that works depends on
 * @hono/node-server's internals, so a hono upgrade is checked against this file.
 */

/**
 * What a stage, or onError, returns once `c.env.outgoing` was written (or destroyed) by hand.
 * @hono/node-server sees its `x-hono-already-sent` header and writes nothing more. One shared
 * object: nothing may set a header on it (no stage touches `c.res.headers`).
 */
export const ALREADY_SENT: Response = RESPONSE_ALREADY_SENT

/**
 * Replaces the response hono holds (an error onError already rendered) with `sent`, an answer a
 * stage wrote into Node's response itself (stale-if-error in the cache stage). Cleared first:
 * hono's `c.res` setter would otherwise build a new Response from `sent` and copy the error's
 * headers onto it, instead of keeping the already-sent marker as it is.
 */
export function replaceResponse(c: Context<GatewayEnv>, sent: Response): void {
  c.res = undefined
  c.res = sent
}
