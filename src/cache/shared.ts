import { decodeEntry, type CacheEntry } from './entry.js'

/** A stored value and its remaining lifetime in the shared tier. */
export interface SharedValue {
  readonly value: Buffer
  /** Milliseconds until the shared tier drops it (Redis PTTL). */
  readonly pttl: number
}

/** The optional tier replicas share; every method degrades to "nothing there" on failure. */
export interface SharedTier {
  get(key: string): Promise<SharedValue | undefined>
  /** Fire and forget: a failed write only costs the other replicas a miss. */
  set(key: string, value: Buffer, pxMs: number): void
  /** Deletes every value whose key starts with one of `prefixes`. */
  dropPrefixes(prefixes: readonly string[]): Promise<void>
  close(): Promise<void>
}

/**
 * The first usable entry stored in the shared tier under one of `keys` (public first). Values are
 * decoded against the key they were read from and must belong to `server`.
 */
export async function readShared(
  shared: SharedTier,
  keys: readonly string[],
  server: string,
  now: () => number,
  usable: (entry: CacheEntry, now: number) => boolean,
): Promise<CacheEntry | undefined> {
  const values = await Promise.all(keys.map((k) => shared.get(k)))
  const t = now()
  for (let i = 0; i < keys.length; i++) {
    const v = values[i]
    if (v === undefined) continue
    const entry = decodeEntry(v.value, keys[i] as string, v.pttl, t)
    if (entry !== undefined && entry.server === server && usable(entry, t)) return entry
  }
  return undefined
}
