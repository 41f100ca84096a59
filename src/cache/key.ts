import { createHash } from 'node:crypto'
import { clientIdOf } from '../match/clients.js'
import type { KeyParams } from './canonical.js'
import type { Invalidation } from '../mcp/changes.js'
import { URI_KEYED_METHODS } from '../mcp/methods.js'
import { enclosingSkills } from '../mcp/skill-paths.js'

/**
 * Who a `private` result belongs to. caching.mdx §cacheScope: private responses MUST NOT be shared
 * across authorization contexts, so every field that makes a token mean something else is in it.
 */
export interface AuthContext {
  readonly issuer: string
  readonly subject: string
  readonly audience: readonly string[]
  readonly scopes: readonly string[]
  /** The OAuth client acting for the subject (`azp` / `client_id`), when the token names one. */
  readonly clientId: string | undefined
}

/** What identifies one cacheable request. */
export interface KeyParts {
  /** The server's cache tag (see serverTag). */
  readonly server: string
  readonly method: string
  /** Protocol version from the (verified) request. */
  readonly version: string | undefined
  /** The request's params and client capabilities in canonical text (canonical.ts). */
  readonly params: KeyParams
  /** `params.uri` of a resources/read or skills/get (see keyUri). */
  readonly uri: string | undefined
  /**
   * What shaped a stored answer besides the request, when the answer is stored after it (a
   * virtual server's merged list, filtered by each member's policy view); undefined when the
   * stored answer is the backend's own and views are applied on every hit.
   */
  readonly view?: string | undefined
}

/**
 * A server's name plus a digest of its upstream URLs: replicas with the same config share keys
 * (Redis), and a server re-pointed at other backends (reload) never reads the old entries.
 */
export function serverTag(name: string, upstreamUrls: readonly string[]): string {
  return `${name}~${digest([...upstreamUrls].sort().join('\n')).slice(0, 12)}`
}

/** Tag of a resource URI inside keys, so `resources/updated` can find the entries of one URI. */
function uriTag(uri: string | undefined): string {
  return uri === undefined ? '-' : digest(uri).slice(0, 22)
}

/**
 * The cache key of a request: server, method, protocol version, every param but `_meta`, and the
 * client's capabilities (caching.mdx §Cache Key: "the request parameters that affect the result",
 * so `cursor` makes each page its own entry and `uri` each resource; a backend may shape its lists
 * by what the client can do, as an HTTP `Vary` would say). The rest of `_meta` (traceparent,
 * progressToken, logLevel, client info) never changes a result and would split entries per
 * request. `view` keys an answer stored after a policy filter by that filter. `auth` makes the
 * key private to one authorization context. Every cache layer builds its keys here, through
 * request.ts requestKeyOf, so the layers agree on what one request is. Layout
 * `<server>:<method>:<uri tag>:<digest>` lets invalidation match by prefix in Redis.
 */
export function cacheKey(parts: KeyParts, auth?: AuthContext): string {
  // SECURITY: the params text is lossless (canonical.ts); a parsed value would round big integers
  // and drop `__proto__` members, so two different requests could read one entry.
  let material = `${parts.version ?? ''}\n${parts.params.params}\n${parts.params.capabilities}`
  // SECURITY: an answer stored after a policy filter serves only callers with the same view. `v`
  // sets it apart from the authorization context, whose text starts with `[`.
  if (parts.view !== undefined) material += `\nv${parts.view}`
  // SECURITY: without the context in the key, one caller's private answer would be another's hit.
  if (auth !== undefined) material += `\n${authMaterial(auth)}`
  return `${parts.server}:${parts.method}:${uriTag(parts.uri)}:${memoDigest(material)}`
}

/** The URI a key is built for: a resources/read's resource, a skills/get's SKILL.md. */
export function keyUri(
  method: string,
  params: Readonly<Record<string, unknown>> | undefined,
): string | undefined {
  if (!URI_KEYED_METHODS.has(method)) return undefined
  const v = params?.uri
  return typeof v === 'string' ? v : undefined
}

function authMaterial(auth: AuthContext): string {
  return JSON.stringify([
    auth.issuer,
    auth.subject,
    [...auth.audience].sort(),
    [...auth.scopes].sort(),
    auth.clientId ?? null,
  ])
}

/** Builds an AuthContext from a verified principal's fields; undefined without a subject. */
export function authContextOf(
  principal:
    | {
        readonly issuer: string
        readonly subject: string
        readonly claims: Readonly<Record<string, unknown>>
        readonly scopes: ReadonlySet<string>
      }
    | undefined,
): AuthContext | undefined {
  if (principal === undefined) return undefined
  const aud = principal.claims.aud
  const audience =
    typeof aud === 'string'
      ? [aud]
      : Array.isArray(aud)
        ? aud.filter((a) => typeof a === 'string')
        : []
  return {
    issuer: principal.issuer,
    subject: principal.subject,
    audience,
    scopes: [...principal.scopes],
    // The same reading as `clients:` and `when.clients` (match/clients.ts).
    clientId: clientIdOf(principal),
  }
}

/** Key prefixes (key.ts layout `<server>:<method>:<uri tag>:`) that a notification covers. */
export function invalidationPrefixes(server: string, what: Invalidation): string[] {
  switch (what.kind) {
    case 'tools':
      return [`${server}:tools/list:`]
    case 'prompts':
      return [`${server}:prompts/list:`]
    case 'resources':
      // A resource gone from the list must not stay readable from cache either. Skills are
      // resources: a server tells of a changed skill with resources/list_changed (skills.mdx
      // defines no notification of its own).
      return [
        `${server}:resources/list:`,
        `${server}:resources/templates/list:`,
        `${server}:resources/read:`,
        `${server}:skills/list:`,
        `${server}:skills/get:`,
      ]
    case 'resource':
      return [`${server}:resources/read:${uriTag(what.uri)}:`, ...skillPrefixes(server, what.uri)]
    case 'all':
      return [`${server}:`]
  }
}

/**
 * What a change to one resource makes stale of the skills: a listing (its entries carry every
 * file's digest) and the entry of each skill the resource may belong to (mcp/skill-paths.ts), or
 * every entry when the URI is too deep to say.
 */
function skillPrefixes(server: string, uri: string): string[] {
  const skills = enclosingSkills(uri)
  if (skills?.length === 0) return []
  const gets =
    skills === undefined
      ? [`${server}:skills/get:`]
      : skills.map((s) => `${server}:skills/get:${uriTag(s)}:`)
  return [`${server}:skills/list:`, ...gets]
}

const digests = new Map<string, string>()
const MEMO_ENTRIES = 4096
const MEMO_TEXT = 512

/**
 * digest() for the few key materials a gateway sees over and over (a first-page list: version +
 * "{}"): a Map lookup instead of a SHA-256 per hit. Bounded: cleared when full, short texts only.
 */
function memoDigest(text: string): string {
  let d = digests.get(text)
  if (d !== undefined) return d
  d = digest(text)
  if (text.length <= MEMO_TEXT) {
    if (digests.size >= MEMO_ENTRIES) digests.clear()
    digests.set(text, d)
  }
  return d
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url')
}
