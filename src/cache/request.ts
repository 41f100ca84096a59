import type { McpRequestInfo } from '../mcp/classify.js'
import { keyParamsOf, type KeyParams } from './canonical.js'
import type { CacheRequest } from './edge-cache.js'
import { authContextOf, cacheKey, keyUri, serverTag, type KeyParts } from './key.js'
import { isCacheableRequest } from './policy.js'

/** The parts of a fronted server the cache keys on. */
export interface CachedServer {
  readonly name: string
  readonly config: { readonly upstreams: readonly { readonly url: string }[] }
}

/** The parts of a principal that form its authorization context. */
export type CachePrincipal = Parameters<typeof authContextOf>[0]

/** Whose answers a key names, besides the request. */
export interface KeyScope {
  /** The server or virtual server the request is for, as the metrics name it. */
  readonly name?: string | undefined
  /** A fronted server's tag (tagOf), or the tag of a virtual server's merged answers. */
  readonly server: string
  /** The policy views a stored answer was filtered by (key.ts KeyParts.view); none for a server. */
  readonly view?: string | undefined
}

const tags = new WeakMap<object, string>()

/** A server's cache tag, computed once per compiled config. */
export function tagOf(server: CachedServer): string {
  let tag = tags.get(server.config)
  if (tag === undefined) {
    tag = serverTag(
      server.name,
      server.config.upstreams.map((u) => u.url),
    )
    tags.set(server.config, tag)
  }
  return tag
}

/** The edge-cache request of a request to a fronted server (requestKeyOf with its tag). */
export function cacheRequestOf(
  server: CachedServer,
  mcp: McpRequestInfo,
  body: Buffer,
  principal: CachePrincipal,
  allowPrivate: boolean,
): { readonly req: CacheRequest; readonly rawId: string } | undefined {
  return requestKeyOf(
    { server: tagOf(server), name: server.name },
    mcp,
    body,
    principal,
    allowPrivate,
  )
}

/**
 * The one canonical cache request of a classified request, for every cache layer (the edge cache
 * and a virtual server's merged answers): server or scope tag, method, protocol version, every
 * param (read losslessly from the text, canonical.ts), client capabilities, a stored answer's
 * policy views, and the caller's authorization context for private answers (key.ts cacheKey).
 * Undefined when the cache must stay out of it: a body that was not parsed and checked against
 * its headers (validation precedes the cache, docs/design/check-order.md), a notification, a
 * 2025-era request (those results carry no cache hints), a non-cacheable method, or an MRTR retry.
 */
export function requestKeyOf(
  scope: KeyScope,
  mcp: McpRequestInfo,
  body: Buffer | string,
  principal: CachePrincipal,
  allowPrivate: boolean,
): { readonly req: CacheRequest; readonly rawId: string } | undefined {
  const message = mcp.message
  // SECURITY: keys come only from a body checked against its headers; a header-only request could
  // read or fill another method's entries (docs/design/check-order.md step 12).
  if (!mcp.verified || mcp.era !== 'modern' || message === undefined || message.kind !== 'request')
    return undefined
  const rawId = message.rawId
  const method = message.method
  if (rawId === undefined || method === undefined || !isCacheableRequest(method, message.params))
    return undefined
  let params: KeyParams
  try {
    params = keyParamsOf(typeof body === 'string' ? body : body.toString('utf8'))
  } catch {
    return undefined // unreachable for a body the strict scanner passed; never guess a key
  }
  const parts: KeyParts = {
    server: scope.server,
    method,
    version: mcp.version,
    params,
    uri: keyUri(method, message.params),
    view: scope.view,
  }
  const auth = allowPrivate ? authContextOf(principal) : undefined
  const req: CacheRequest = {
    server: parts.server,
    name: scope.name,
    method,
    uri: parts.uri,
    publicKey: cacheKey(parts),
    privateKey: auth === undefined ? undefined : cacheKey(parts, auth),
  }
  return { req, rawId }
}
