/**
 * URLs and challenges of the gateway as an OAuth 2.1 resource server (spec 2026-07-28 §8,
 * RFC 9728). Everything is built from `auth.publicUrl`, never from the request's Host or scheme,
 * so it stays right behind a TLS-terminating proxy (docs/auth.md, Configuration).
 */

/** The well-known prefix of RFC 9728 §3. */
export const PRM_PREFIX = '/.well-known/oauth-protected-resource'

/** `auth.publicUrl` split into origin and path prefix, without a trailing slash. */
export interface PublicBase {
  readonly origin: string
  /** '' or '/something' (a gateway mounted under a path by the proxy in front). */
  readonly prefix: string
}

/** Parses `auth.publicUrl` (validated by the schema and the loader). */
export function publicBase(publicUrl: string): PublicBase {
  const u = new URL(publicUrl)
  return { origin: u.origin, prefix: u.pathname.replace(/\/+$/, '') }
}

/** The canonical resource URI of one server: what clients send as RFC 8707 `resource`. */
export function resourceUrl(base: PublicBase, server?: string): string {
  return `${base.origin}${base.prefix}${server === undefined ? '' : `/mcp/${server}`}`
}

/** RFC 9728 §3.1: the well-known segment goes between the host and the resource's path. */
export function metadataUrl(base: PublicBase, server?: string): string {
  return `${base.origin}${PRM_PREFIX}${base.prefix}${server === undefined ? '' : `/mcp/${server}`}`
}

/** The `WWW-Authenticate` challenges of one server, built once per config. */
export interface Challenges {
  /** 401, no token sent (RFC 6750 §3.1: no error code then). */
  readonly missing: string
  /** 401, a token was sent and refused. */
  readonly invalid: string
  /** 401, a token was offered in the query string (RFC 6750 §3.1 invalid_request). */
  readonly invalidRequest: string
  /** 403, the token lacks scopes; names all of them in one challenge (spec §8). */
  readonly insufficientScope: string
}

/** Builds the challenges; `scopes` are the server's required scopes (RFC 6750 §3 `scope`). */
export function challengesFor(prmUrl: string, scopes: readonly string[]): Challenges {
  const meta = `resource_metadata="${prmUrl}"`
  const scope = scopeParam(scopes)
  return {
    missing: `Bearer ${scope}${meta}`,
    invalid: `Bearer error="invalid_token", ${scope}${meta}`,
    invalidRequest: `Bearer error="invalid_request", ${meta}`,
    insufficientScope: insufficientScope(prmUrl, scopes),
  }
}

/**
 * The 403 of a token that lacks scopes: RFC 6750 §3.1 `insufficient_scope`, with every scope the
 * operation needs in one `scope` (spec 2026-07-28 basic/authorization: insufficient scope SHOULD be
 * a 403 naming them all), which a client adds to what it asks the authorization server for when
 * it steps up.
 * `scopes` are scope-tokens (config schema), so they sit in the quoted string as they are.
 */
export function insufficientScope(prmUrl: string, scopes: readonly string[]): string {
  return `Bearer error="insufficient_scope", ${scopeParam(scopes)}resource_metadata="${prmUrl}"`
}

function scopeParam(scopes: readonly string[]): string {
  return scopes.length === 0 ? '' : `scope="${scopes.join(' ')}", `
}

/** RFC 9728 §2 document; field names are the RFC's. */
export interface ProtectedResourceMetadata {
  readonly resource: string
  readonly authorization_servers: readonly string[]
  readonly scopes_supported?: readonly string[]
  readonly bearer_methods_supported: readonly ['header']
}

/** The metadata document for one resource; only header tokens are accepted (spec §8). */
export function metadataFor(
  resource: string,
  authorizationServers: readonly string[],
  scopes: readonly string[],
): ProtectedResourceMetadata {
  return {
    resource,
    authorization_servers: authorizationServers,
    ...(scopes.length > 0 && { scopes_supported: scopes }),
    bearer_methods_supported: ['header'],
  }
}
