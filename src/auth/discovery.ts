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
 * The issuer's metadata document, the one source every reader of it uses (the JWKS location, the
 * per-user OAuth client, token introspection). Each location of `metadataUrls` is fetched bounded
 * (no redirects, `timeoutMs` for the whole exchange, 64 KiB); the first that answers 200 decides,
 * a 4xx moves on to the next, any other failure ends the search. Throws DiscoveryFailure.
 */
export async function fetchIssuerMetadata(
  issuer: string,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
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
    return issuerDocument(text, issuer)
  }
  throw new DiscoveryFailure('issuer publishes no metadata')
}

/** A metadata document's members, if it is a JSON object this issuer may be trusted by. */
function issuerDocument(text: string, issuer: string): Record<string, unknown> {
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    throw new DiscoveryFailure('metadata is not JSON')
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new DiscoveryFailure('metadata is not JSON')
  const meta = doc as Record<string, unknown>
  // SECURITY: RFC 8414 §3.3: a document naming another issuer must not be used (it could hand us
  // another's keys or endpoints).
  if (meta['issuer'] !== issuer) throw new DiscoveryFailure('metadata names another issuer')
  return meta
}

/**
 * Finds the issuer's `jwks_uri`: an absolute https URL, or http when the issuer itself is http (a
 * local identity provider).
 */
export async function discoverJwksUri(issuer: string, timeoutMs: number): Promise<URL> {
  return jwksUriOf(await fetchIssuerMetadata(issuer, timeoutMs), issuer)
}

/** The `jwks_uri` of a metadata document's text, if the document may be used for this issuer. */
export function checkJwksUri(text: string, issuer: string): URL {
  return jwksUriOf(issuerDocument(text, issuer), issuer)
}

function jwksUriOf(meta: Record<string, unknown>, issuer: string): URL {
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
