import { keyedName, open, seal, type UserKeys } from './seal.js'

/**
 * One user's tokens at one server's service, as stored (sealed: userauth/seal.ts). Kept per
 * (issuer, subject, server): the verified caller of the gateway, never a claim the client chose.
 */
export interface TokenRecord {
  readonly iss: string
  readonly sub: string
  readonly server: string
  readonly access: string
  readonly refresh?: string | undefined
  /** Epoch ms after which the access token is expired (from `expires_in`); unknown: absent. */
  readonly expiresAt?: number | undefined
  readonly scope?: string | undefined
  readonly connectedAt: number
  readonly refreshedAt?: number | undefined
}

/** Store names of token records start so; then the server name, then a keyed hash of the user. */
export const RECORD_PREFIX = 't:'

/**
 * How long a record stays in the store without being written again (a refresh writes it). A user
 * who does not use a server for that long connects again; records sealed with a key that was
 * since rotated away go with it.
 */
export const RECORD_TTL_MS = 30 * 24 * 3600_000

/**
 * The store name of a user's record at a server: the server in the clear (listing by server), the
 * user as a keyed hash (a store's keys name nobody; docs/security.md §Per-user tokens).
 */
export function recordName(keys: UserKeys, server: string, iss: string, sub: string): string {
  return `${RECORD_PREFIX}${server}:${keyedName(keys.names, [iss, sub])}`
}

/** The record sealed for its store name: a record copied to another name does not open. */
export function sealRecord(keys: UserKeys, name: string, record: TokenRecord): string {
  return seal(keys.tokens, name, JSON.stringify(record))
}

/**
 * The record stored under `name`, or undefined when it does not open (another key, or moved) or
 * is not one: an unreadable record counts as no record, never as an error.
 */
export function openRecord(keys: UserKeys, name: string, sealed: string): TokenRecord | undefined {
  const text = open(keys.tokens, name, sealed)
  if (text === undefined) return undefined
  try {
    const r = JSON.parse(text) as Partial<TokenRecord>
    if (
      typeof r.iss !== 'string' ||
      typeof r.sub !== 'string' ||
      typeof r.server !== 'string' ||
      typeof r.access !== 'string' ||
      typeof r.connectedAt !== 'number'
    )
      return undefined
    return r as TokenRecord
  } catch {
    return undefined
  }
}

/** The server a record name is for (listing without the key). */
export function serverOfName(name: string): string | undefined {
  if (!name.startsWith(RECORD_PREFIX)) return undefined
  const rest = name.slice(RECORD_PREFIX.length)
  const at = rest.lastIndexOf(':')
  return at <= 0 ? undefined : rest.slice(0, at)
}
