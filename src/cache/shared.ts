import type { CacheEntry } from './entry.js'
import { decodeShared } from './shared-entry.js'

/** A stored value and its remaining lifetime in the shared tier. */
export interface SharedValue {
  readonly value: Buffer
  /** Milliseconds until the shared tier drops it (Redis PTTL). */
  readonly pttl: number
}

/**
 * Whether the shared tier is in use. `connected`: reads and writes go to it. `connecting`: no
 * connection yet (start), or it was lost and is being made again. `bypassed`: connected but
 * skipped, because it stopped answering (`not_answering`: its circuit breaker is open) or because
 * invalidations it missed are still being sent to it (`catching_up`). In every state but
 * `connected` the gateway answers from memory and the backends alone.
 */
export type SharedTierStatus =
  | { readonly state: 'connected' | 'connecting' }
  | { readonly state: 'bypassed'; readonly reason: 'not_answering' | 'catching_up' }

/** The optional tier replicas share; every method degrades to "nothing there" on failure. */
export interface SharedTier {
  /** Resolves once the first connection attempt has settled, whatever its outcome; never rejects. */
  connect(): Promise<void>
  status(): SharedTierStatus
  get(key: string): Promise<SharedValue | undefined>
  /** Fire and forget: a failed write only costs the other replicas a miss. */
  set(key: string, value: Buffer, pxMs: number): void
  /** Fire and forget: removes one value (one that failed its checks). */
  delete(key: string): void
  /** Deletes every value whose key starts with one of `prefixes`. */
  dropPrefixes(prefixes: readonly string[]): Promise<void>
  close(): Promise<void>
}

/** The request a shared read is for (edge-cache.ts CacheRequest). */
export interface SharedLookup {
  readonly server: string
  readonly method: string
  readonly uri: string | undefined
  readonly publicKey: string
  readonly privateKey: string | undefined
}

/** What readShared needs besides the request. */
export interface SharedReadOptions {
  readonly now: () => number
  /** cache.maxTtlMs of this gateway. */
  readonly maxTtlMs: number
  readonly usable: (entry: CacheEntry, now: number) => boolean
  /** Told about each value that failed its checks (shared-entry.ts decodeShared). */
  readonly onReject: (key: string, why: string) => void
}

/**
 * The first usable entry stored in the shared tier for `req` (public key first). Each value is
 * checked against the key it was read from, and what that key stands for, before it is trusted.
 */
export async function readShared(
  shared: SharedTier,
  req: SharedLookup,
  opts: SharedReadOptions,
): Promise<CacheEntry | undefined> {
  const [pub, priv] = await Promise.all([
    shared.get(req.publicKey),
    req.privateKey === undefined ? undefined : shared.get(req.privateKey),
  ])
  const t = opts.now()
  for (const [value, key, scope] of [
    [pub, req.publicKey, 'public'],
    [priv, req.privateKey, 'private'],
  ] as const) {
    if (value === undefined || key === undefined) continue
    const read = decodeShared(
      value.value,
      {
        key,
        scope,
        server: req.server,
        method: req.method,
        uri: req.uri,
        maxTtlMs: opts.maxTtlMs,
      },
      value.pttl,
      t,
    )
    if ('rejected' in read) opts.onReject(key, read.rejected)
    else if (opts.usable(read.entry, t)) return read.entry
  }
  return undefined
}
