import { createHash } from 'node:crypto'
import { isRecord } from '../mcp/jsonrpc.js'

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
  /** The request's params; `_meta` is ignored. */
  readonly params: Readonly<Record<string, unknown>> | undefined
}

/**
 * A server's name plus a digest of its upstream URLs: replicas with the same config share keys
 * (Redis), and a server re-pointed at other backends (reload) never reads the old entries.
 */
export function serverTag(name: string, upstreamUrls: readonly string[]): string {
  return `${name}~${digest([...upstreamUrls].sort().join('\n')).slice(0, 12)}`
}

/** Tag of a resource URI inside keys, so `resources/updated` can find the entries of one URI. */
export function uriTag(uri: string | undefined): string {
  return uri === undefined ? '-' : digest(uri).slice(0, 22)
}

/**
 * The cache key of a request: server, method, every param but `_meta` (caching.mdx §Cache Key:
 * "the request parameters that affect the result", so `cursor` makes each page its own entry and
 * `uri` each resource), and protocol version. `_meta` (traceparent, logLevel, client info) never
 * changes a result and would split entries per caller. `auth` makes the key private to one
 * authorization context. Layout `<server>:<method>:<uri tag>:<digest>` lets invalidation match
 * by prefix in Redis.
 */
export function cacheKey(parts: KeyParts, auth?: AuthContext): string {
  const uri = parts.method === 'resources/read' ? stringParam(parts.params, 'uri') : undefined
  let material = `${parts.version ?? ''}\n${canonicalParams(parts.params)}`
  // SECURITY: without the context in the key, one caller's private answer would be another's hit.
  if (auth !== undefined) material += `\n${authMaterial(auth)}`
  return `${parts.server}:${parts.method}:${uriTag(uri)}:${memoDigest(material)}`
}

/** The resource URI a key was built for (resources/read only). */
export function keyUri(
  method: string,
  params: Readonly<Record<string, unknown>> | undefined,
): string | undefined {
  return method === 'resources/read' ? stringParam(params, 'uri') : undefined
}

function stringParam(
  params: Readonly<Record<string, unknown>> | undefined,
  name: string,
): string | undefined {
  const v = params?.[name]
  return typeof v === 'string' ? v : undefined
}

/** Params without `_meta`, keys sorted at every level, so equal requests give equal text. */
export function canonicalParams(params: Readonly<Record<string, unknown>> | undefined): string {
  if (params === undefined) return '{}'
  let plain = true
  for (const k in params) {
    if (k !== '_meta') {
      plain = false
      break
    }
  }
  if (plain) return '{}' // the common case: a first-page list with only the envelope
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(params).sort()) if (k !== '_meta') out[k] = sortKeys(params[k])
  return JSON.stringify(out)
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys)
  if (!isRecord(v)) return v
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k])
  return out
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
  const azp = principal.claims.azp ?? principal.claims.client_id
  return {
    issuer: principal.issuer,
    subject: principal.subject,
    audience,
    scopes: [...principal.scopes],
    clientId: typeof azp === 'string' ? azp : undefined,
  }
}

/** What a change notification invalidates (subscriptions.mdx / caching.mdx §Invalidation). */
export type Invalidation =
  | { readonly kind: 'tools' | 'prompts' | 'resources' | 'all' }
  | { readonly kind: 'resource'; readonly uri: string }

/** Key prefixes (key.ts layout `<server>:<method>:<uri tag>:`) that a notification covers. */
export function invalidationPrefixes(server: string, what: Invalidation): string[] {
  switch (what.kind) {
    case 'tools':
      return [`${server}:tools/list:`]
    case 'prompts':
      return [`${server}:prompts/list:`]
    case 'resources':
      // A resource gone from the list must not stay readable from cache either.
      return [
        `${server}:resources/list:`,
        `${server}:resources/templates/list:`,
        `${server}:resources/read:`,
      ]
    case 'resource':
      return [`${server}:resources/read:${uriTag(what.uri)}:`]
    case 'all':
      return [`${server}:`]
  }
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
