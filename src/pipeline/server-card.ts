import type { Context } from 'hono'
import { CARD_CORS, cardAnswer, catalogAnswer, type CardAnswer } from '../cards/serve.js'
import { CARD_SUFFIX, CATALOG_PATH } from '../cards/build.js'
import { GatewayError } from '../errors.js'
import type { GatewayRuntime } from '../runtime/runtime.js'
import type { GatewayEnv } from './env.js'

/**
 * Server Cards and the AI Catalog (docs/operations.md §Server Cards). These routes are not MCP
 * endpoints: GET and HEAD only, no MCP pipeline, no authentication (the extension makes cards
 * public connectivity data), precomputed bytes per config.
 */

/** `/mcp/<name>/server-card`: two segments under /mcp, so never the `/mcp/:server` route. */
export const CARD_ROUTE = `/mcp/:server${CARD_SUFFIX}`
export { CATALOG_PATH }

/** GET (and HEAD, which hono answers from it without the body) of one endpoint's card. */
export const serverCard = (runtime: GatewayRuntime) =>
  function serverCard(c: Context<GatewayEnv>): Response {
    const a = cardAnswer(runtime.cards, c.req.param('server') ?? '', c.req.header('if-none-match'))
    // A hidden endpoint's card is answered exactly as an unknown server's.
    if (a === undefined) throw new GatewayError('unknown_server')
    return respond(c, a)
  }

/** GET (and HEAD) of /.well-known/ai-catalog.json. */
export const aiCatalog = (runtime: GatewayRuntime) =>
  function aiCatalog(c: Context<GatewayEnv>): Response {
    const a = catalogAnswer(runtime.cards, c.req.header('if-none-match'))
    if (a === undefined) throw new GatewayError('unknown_server')
    return respond(c, a)
  }

/** CORS preflight of a browser that revalidates with If-None-Match (not a safelisted header). */
export function cardPreflight(c: Context<GatewayEnv>): Response {
  return c.body(null, 204, { ...CARD_CORS, 'access-control-max-age': '86400' })
}

function respond(c: Context<GatewayEnv>, a: CardAnswer): Response {
  if (a.body === undefined) return c.body(null, 304, a.headers)
  return c.body(new Uint8Array(a.body), 200, a.headers)
}
