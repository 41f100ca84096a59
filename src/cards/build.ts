import { createHash } from 'node:crypto'
import type { AuthRuntime } from '../auth/compile.js'
import { metadataUrl, publicBase, resourceUrl, type PublicBase } from '../auth/resource.js'
import type { EndpointCardConfig, GatewayConfig } from '../config/schema.js'
import { GATEWAY_INFO, LEGACY_VERSION, MODERN_VERSION } from '../mcp/protocol.js'

/**
 * Server Cards and the AI Catalog of the endpoints the gateway exposes (MCP Server Card
 * extension, SEP-2127: docs/discovery.md and schema.ts of modelcontextprotocol/experimental-ext-
 * server-card; AI Catalog spec). Everything is built once per config from the gateway's own
 * config: its public URL, the versions it serves, its RFC 9728 metadata. Nothing of a backend's
 * config (upstream URLs, headers, credentials) and nothing a backend says is ever read here.
 */

export const CARD_MEDIA_TYPE = 'application/mcp-server-card+json'
export const CATALOG_MEDIA_TYPE = 'application/ai-catalog+json'
/** The one `$schema` the extension allows (schema.ts: versioned by its `vN` segment). */
const CARD_SCHEMA = 'https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json'
/** Where the card of an endpoint lives: `<streamable-http-url>/server-card` (docs/discovery.md). */
export const CARD_SUFFIX = '/server-card'
export const CATALOG_PATH = '/.well-known/ai-catalog.json'
/** `_meta` key of the authorization hints (not a reserved prefix: MCP basic §_meta). */
const AUTH_META = 'mcp-edge/authorization'
/** The card schema's `description` is required; said when the config gives none. */
const DEFAULT_DESCRIPTION = 'An MCP server reached through this gateway.'
/** The card schema's bound on `name` (namespace/server). */
const MAX_NAME = 200

/** One document, as the bytes served and their strong validator. */
export interface CardDocument {
  readonly body: Buffer
  /** A strong entity tag: a hash of exactly these bytes (RFC 9110 §8.8.3). */
  readonly etag: string
}

/** What the card routes serve for one runtime. */
export interface CardSet {
  /** Cards of listed endpoints, by exact endpoint name; hidden ones are absent. */
  readonly cards: ReadonlyMap<string, CardDocument>
  readonly catalog: CardDocument
  /** `Cache-Control` of every card document. */
  readonly cacheControl: string
}

/** One exposed endpoint: a server or a virtual server. */
interface Endpoint {
  readonly name: string
  readonly card: EndpointCardConfig
  /** Versions the gateway serves a client on this endpoint. */
  readonly versions: readonly string[]
}

/**
 * The card set of a config, or undefined when cards are off or the gateway does not know its
 * public URL. Throws on a config that names two public URLs.
 */
export function compileCards(
  config: GatewayConfig,
  auth: AuthRuntime | undefined,
): CardSet | undefined {
  if (!config.cards.enabled) return undefined
  const problems = cardsProblems(config)
  if (problems.length > 0) throw new Error(problems.join('; '))
  // SECURITY: the card URLs come from configuration only, never from the request's Host: the
  // documents are served with `Cache-Control: public`, and a Host-built URL would let one request
  // poison every shared cache with a card pointing clients at another server.
  const publicUrl = config.auth?.publicUrl ?? config.cards.publicUrl
  if (publicUrl === undefined) return undefined
  const base = publicBase(publicUrl)
  const host = new URL(publicUrl).hostname
  const namespace = config.cards.namespace ?? reverseDns(host)
  const endpoints: Endpoint[] = []
  for (const [name, s] of Object.entries(config.servers)) {
    endpoints.push({
      name,
      card: s.card,
      // 2025-era clients are passed on only where the server allows them (front-door.ts).
      versions: s.legacyClients === 'allow' ? [MODERN_VERSION, LEGACY_VERSION] : [MODERN_VERSION],
    })
  }
  // A virtual server serves 2025-era clients itself (docs/virtual-servers.md "2025-era clients").
  for (const [name, v] of Object.entries(config.virtualServers))
    endpoints.push({ name, card: v.card, versions: [MODERN_VERSION, LEGACY_VERSION] })

  const cards = new Map<string, CardDocument>()
  const entries: Record<string, unknown>[] = []
  for (const e of endpoints) {
    const cardName = `${namespace}/${e.name}`
    // SECURITY: hidden endpoints get no card and no entry, so neither document names them. A
    // name past the card schema's bound has no valid card, so it is not published either.
    if (!e.card.listed || cardName.length > MAX_NAME) continue
    const card = cardFor(e, cardName, base, auth)
    cards.set(e.name, documentOf(card))
    const url = `${resourceUrl(base, e.name)}${CARD_SUFFIX}`
    entries.push({
      identifier: `urn:air:${host}:mcp:${e.name}`,
      // `type` is the extension's member (docs/discovery.md); `mediaType` and `displayName` are
      // what the AI Catalog 1.0 text requires of every entry, for clients that read that one.
      type: CARD_MEDIA_TYPE,
      mediaType: CARD_MEDIA_TYPE,
      displayName: e.card.title ?? e.name,
      url,
    })
  }
  return {
    cards,
    catalog: documentOf({ specVersion: '1.0', entries }),
    cacheControl: `public, max-age=${config.cards.maxAgeSec}`,
  }
}

/** What the schema cannot see: one public URL only, and one a client can be sent to. */
export function cardsProblems(config: GatewayConfig): string[] {
  const own = config.cards.publicUrl
  if (own === undefined) return []
  if (config.auth !== undefined)
    return ['cards.publicUrl: leave it out with auth: (the cards use auth.publicUrl)']
  const u = new URL(own)
  if (u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '')
    return ['cards.publicUrl: no query, fragment or userinfo allowed']
  return []
}

/** The card of one endpoint: identity, and how to connect to the gateway's URL for it. */
function cardFor(
  e: Endpoint,
  name: string,
  base: PublicBase,
  auth: AuthRuntime | undefined,
): Record<string, unknown> {
  const remote: Record<string, unknown> = {
    type: 'streamable-http',
    url: resourceUrl(base, e.name),
    supportedProtocolVersions: e.versions,
  }
  const card: Record<string, unknown> = {
    $schema: CARD_SCHEMA,
    name,
    version: e.card.version ?? GATEWAY_INFO.version,
    description: e.card.description ?? DEFAULT_DESCRIPTION,
    ...(e.card.title !== undefined && { title: e.card.title }),
    ...(e.card.websiteUrl !== undefined && { websiteUrl: e.card.websiteUrl }),
    remotes: [remote],
  }
  const serverAuth = auth?.servers.get(e.name)
  if (serverAuth !== undefined) {
    const prm = metadataUrl(base, e.name)
    remote.headers = [
      {
        name: 'Authorization',
        description: `OAuth 2.1 bearer token for ${serverAuth.metadata.resource} (RFC 9728 metadata: ${prm})`,
        isRequired: true,
        isSecret: true,
      },
    ]
    // The RFC 9728 document is the authority; this only saves a client the first 401.
    card._meta = {
      [AUTH_META]: {
        resource: serverAuth.metadata.resource,
        resourceMetadata: prm,
        scopesRequired: serverAuth.requiredScopes,
      },
    }
  }
  return card
}

/** `mcp.example.com` → `com.example.mcp`; an IP address stays as it is. */
function reverseDns(host: string): string {
  if (/^[0-9.]+$/.test(host) || host.includes(':') || host.startsWith('[')) {
    return host.replace(/[^a-zA-Z0-9.-]/g, '-')
  }
  return host.split('.').reverse().join('.')
}

function documentOf(doc: unknown): CardDocument {
  const body = Buffer.from(JSON.stringify(doc), 'utf8')
  const etag = `"${createHash('sha256').update(body).digest('base64url')}"`
  return { body, etag }
}
