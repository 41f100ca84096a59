import { isRecord } from '../mcp/jsonrpc.js'
import type { StoreDecision } from './policy.js'

/**
 * One stored answer. The upstream's result is kept exactly (its `_meta.serverInfo` included) but
 * serialised once, without `ttlMs`, so a hit is spliced from bytes: prefix + the requester's raw id
 * + the result + the remaining ttl + suffix (docs/design/hot-path.md: a hit must not
 * re-serialise the list).
 */
export interface CacheEntry {
  readonly key: string
  /** Server tag (key.ts serverTag). */
  readonly server: string
  readonly method: string
  /** The resource URI of a resources/read entry. */
  readonly uri: string | undefined
  readonly scope: 'public' | 'private'
  /** ttlMs as the backend sent it; a hit reports it minus the entry's age. */
  readonly ttlMs: number
  /** Fresh for this long after storedAt (ttlMs capped by cache.maxTtlMs). */
  readonly lifeMs: number
  /** Clock time (ms) the entry was received. */
  readonly storedAt: number
  /** UTF-8 JSON of the result object minus `ttlMs`; always has other members (resultType …). */
  readonly result: Buffer
}

/** Where an entry came from, besides the upstream message. */
export interface EntryOrigin {
  readonly key: string
  readonly server: string
  readonly method: string
  readonly uri: string | undefined
  readonly storedAt: number
}

/** Serialises a storable response once (the result's members keep their order; ttlMs goes last). */
export function createEntry(
  message: Readonly<Record<string, unknown>>,
  decision: StoreDecision,
  origin: EntryOrigin,
): CacheEntry {
  const result = message.result as Record<string, unknown>
  const { ttlMs: _ttl, ...rest } = result
  return {
    ...origin,
    scope: decision.scope,
    ttlMs: decision.ttlMs,
    lifeMs: decision.lifeMs,
    result: Buffer.from(JSON.stringify(rest)),
  }
}

/** Bytes an entry holds in memory (what maxBytes and maxEntryBytes bound). */
export function entrySize(entry: CacheEntry): number {
  return entry.result.length + entry.key.length + (entry.uri?.length ?? 0) + 200
}

/** ttlMs left: the backend's ttl minus the entry's age, never negative (caching.mdx §ttlMs). */
export function remainingTtl(entry: CacheEntry, now: number): number {
  return Math.max(0, Math.floor(entry.ttlMs - (now - entry.storedAt)))
}

/** A hit as three pieces: the envelope with the id, the stored result, the ttl and closing. */
export interface HitParts {
  readonly head: Buffer
  /** The stored result bytes without their closing brace (a view, never a copy). */
  readonly body: Buffer
  readonly tail: Buffer
  readonly length: number
}

/**
 * The JSON-RPC response for one requester, in pieces, so the stored bytes are written as they are
 * (no 20 KB copy and allocation per hit). `rawId` is the id's raw JSON text from the request,
 * byte-exact, so 12345678901234567890 and escaped strings survive (docs/design/error-contract.md).
 * `result` overrides the entry's bytes (a filtered variant of it).
 */
export function hitParts(
  entry: CacheEntry,
  rawId: string,
  now: number,
  result = entry.result,
): HitParts {
  const head = Buffer.from(`{"jsonrpc":"2.0","id":${rawId},"result":`)
  const body = result.subarray(0, result.length - 1) // the closing brace goes; ttlMs goes in there
  const tail = Buffer.from(`,"ttlMs":${remainingTtl(entry, now)}}}`)
  return { head, body, tail, length: head.length + body.length + tail.length }
}

/** The stored result as an object (for policy filters), with the backend's ttlMs back in. */
export function parseResult(entry: CacheEntry): Record<string, unknown> {
  const parsed: unknown = JSON.parse(entry.result.toString('utf8'))
  if (!isRecord(parsed)) throw new Error('cache entry result is not an object')
  return { ...parsed, ttlMs: entry.ttlMs }
}

/** Serialises a result object as stored bytes (without ttlMs), for filtered variants. */
export function resultBytes(result: Readonly<Record<string, unknown>>): Buffer {
  const { ttlMs: _ttl, ...rest } = result
  return Buffer.from(JSON.stringify(rest))
}
