import { BoundedFetchFailure, fetchBounded } from './bounded-fetch.js'

/** Authorization server metadata documents are a few KiB; a larger answer is refused. */
const MAX_METADATA_BYTES = 64 * 1024

/** Why the issuer's metadata gave no usable `jwks_uri`; `message` is short fixed text. */
export class DiscoveryFailure extends Error {
  override readonly name = 'DiscoveryFailure'
}

/**
 * The metadata URLs of an issuer, in the order MCP clients try them (spec 2026-07-28
 * basic/authorization, Authorization Server Metadata Discovery): RFC 8414 §3.1 with the
 * well-known segment inserted before the issuer's path, then OpenID Connect Discovery inserted
 * the same way, then appended to the path (OpenID Connect Discovery 1.0 §4.1).
 */
export function metadataUrls(issuer: string): string[] {
  const u = new URL(issuer)
  const path = u.pathname.replace(/\/+$/, '')
  const urls = [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${u.origin}/.well-known/openid-configuration${path}`,
  ]
  if (path !== '') urls.push(`${u.origin}${path}/.well-known/openid-configuration`)
  return urls
}

/**
 * Finds the issuer's `jwks_uri`. Each document is fetched bounded (no redirects, `timeoutMs` for
 * the whole exchange, 64 KiB). The first one that answers 200 decides: its `issuer` must be the
 * configured one, byte for byte (RFC 8414 §3.3: otherwise the document must not be used), and its
 * `jwks_uri` an absolute https URL, or http when the issuer itself is http (a local identity
 * provider). A 4xx moves on to the next location; any other failure ends discovery.
 */
export async function discoverJwksUri(issuer: string, timeoutMs: number): Promise<URL> {
  for (const url of metadataUrls(issuer)) {
    let text: string
    try {
      ;({ text } = await fetchBounded(url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        timeoutMs,
        maxBytes: MAX_METADATA_BYTES,
      }))
    } catch (err) {
      // A location the server does not serve (404, or a 4xx some servers send) moves on.
      if (err instanceof BoundedFetchFailure && /^answered 4\d\d$/.test(err.message)) continue
      const why = err instanceof BoundedFetchFailure ? err.message : 'failed'
      throw new DiscoveryFailure(`issuer metadata ${why}`, { cause: err })
    }
    return checkJwksUri(text, issuer)
  }
  throw new DiscoveryFailure('issuer publishes no metadata')
}

/** The `jwks_uri` of a metadata document, if the document may be used for this issuer. */
export function checkJwksUri(text: string, issuer: string): URL {
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    throw new DiscoveryFailure('metadata is not JSON')
  }
  if (typeof doc !== 'object' || doc === null) throw new DiscoveryFailure('metadata is not JSON')
  const meta = doc as Record<string, unknown>
  // SECURITY: RFC 8414 §3.3: a document naming another issuer could hand us another's keys.
  if (meta['issuer'] !== issuer) throw new DiscoveryFailure('metadata names another issuer')
  const raw = meta['jwks_uri']
  if (typeof raw !== 'string' || !URL.canParse(raw)) {
    throw new DiscoveryFailure('metadata has no jwks_uri')
  }
  const jwks = new URL(raw)
  const allowed = new URL(issuer).protocol === 'http:' ? ['https:', 'http:'] : ['https:']
  // SECURITY: keys over plain http from an https issuer could be swapped on the way.
  if (!allowed.includes(jwks.protocol)) throw new DiscoveryFailure('jwks_uri is not https')
  return jwks
}

/** Where a remote key set lives: a fixed URL, or one the issuer's metadata names. */
export interface JwksLocation {
  url(): Promise<string>
  /** The set could not be fetched: look the URL up again next time (it may have moved). */
  forget(): void
}

/** A configured `jwksUrl`. */
export function fixedLocation(url: URL): JwksLocation {
  const href = Promise.resolve(url.href)
  return { url: () => href, forget: () => {} }
}

/** `jwks_uri` from the issuer's metadata, looked up once and again after a failed fetch. */
export function discoveredLocation(issuer: string, timeoutMs: number): JwksLocation {
  let found: Promise<string> | undefined
  return {
    url: () => (found ??= discoverJwksUri(issuer, timeoutMs).then((u) => u.href)),
    forget: () => void (found = undefined),
  }
}
