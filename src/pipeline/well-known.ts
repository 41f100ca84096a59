import type { Context } from 'hono'
import { PRM_PREFIX } from '../auth/resource.js'
import type { GatewayEnv } from './env.js'
import { GatewayError } from '../errors.js'
import type { RuntimeRef } from '../runtime/ref.js'

/** Paths the metadata route is registered on (root and per server). */
export const PRM_ROUTES = [PRM_PREFIX, `${PRM_PREFIX}/*`] as const

/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728), which MCP servers MUST serve (spec §8):
 * `<PRM_PREFIX>[/prefix]/mcp/<server>` describes one server, and the root `<PRM_PREFIX>[/prefix]`
 * the gateway as a whole (resource = `auth.publicUrl`, every scope any server requires).
 * Unknown servers, and any path without `auth:` configured, are 404.
 */
export const protectedResourceMetadata = (ref: RuntimeRef) =>
  function protectedResourceMetadata(c: Context<GatewayEnv>): Response {
    const auth = ref.current.auth
    if (auth === undefined) throw new GatewayError('unknown_server')
    let rest = c.req.path.slice(PRM_PREFIX.length)
    // The public path prefix may or may not have been stripped by the proxy in front.
    if (auth.prefix !== '' && (rest === auth.prefix || rest.startsWith(`${auth.prefix}/`))) {
      rest = rest.slice(auth.prefix.length)
    }
    let doc
    if (rest === '' || rest === '/') doc = auth.rootMetadata
    else if (rest.startsWith('/mcp/')) doc = auth.servers.get(rest.slice('/mcp/'.length))?.metadata
    if (doc === undefined) throw new GatewayError('unknown_server')
    return c.json(doc, 200, {
      'cache-control': 'public, max-age=60',
      // Public, credential-free data that browser-based clients must be able to read.
      'access-control-allow-origin': '*',
    })
  }
