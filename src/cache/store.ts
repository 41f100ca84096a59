import { LRUCache } from 'lru-cache'
import { entrySize, type CacheEntry } from './entry.js'

/** Milliseconds from an arbitrary origin; injectable so tests can move time. */
export type Clock = () => number

/** A stored item: an entry, or a policy-filtered variant of one (same lifetime, own bytes). */
export interface Slot {
  readonly entry: CacheEntry
  /** Result bytes to render: entry.result, or the filtered result for a variant. */
  readonly bytes: Buffer
}

/** Bounds and clock of the in-memory tier. */
export interface MemoryTierOptions {
  readonly maxBytes: number
  readonly maxEntryBytes: number
  /** Kept this long past freshness, for stale-if-error only. */
  readonly staleMs: number
  readonly now: Clock
  /** Called for entries pushed out by size ('evict') or age ('expire'). */
  readonly onDrop?: (reason: 'evict' | 'expire') => void
}

/**
 * The in-memory LRU, bounded in bytes (lru-cache maxSize + sizeCalculation; maxEntrySize refuses
 * oversized entries), so it never grows past `maxBytes` whatever the load
 * (docs/design/limits.md).
 * Time comes from `now` (lru-cache `perf`), never from Date directly.
 */
export class MemoryTier {
  private readonly lru: LRUCache<string, Slot>

  constructor(private readonly opts: MemoryTierOptions) {
    this.lru = new LRUCache<string, Slot>({
      maxSize: opts.maxBytes,
      maxEntrySize: Math.min(opts.maxEntryBytes, opts.maxBytes),
      sizeCalculation: (slot, key) => slotSize(slot, key),
      perf: { now: opts.now },
      // 0: read the clock on every check instead of caching it behind a timer per lookup.
      ttlResolution: 0,
      updateAgeOnGet: false,
      allowStale: false,
      dispose: (_slot, _key, reason) => {
        if (reason === 'evict' || reason === 'expire') opts.onDrop?.(reason)
      },
    })
  }

  /** The slot under `key` while it is fresh or within the stale window; undefined otherwise. */
  get(key: string): Slot | undefined {
    const slot = this.lru.get(key)
    if (slot === undefined) return undefined
    // lru-cache expires only once age > ttl; freshness here is age < lifetime (caching.mdx §ttlMs).
    const e = slot.entry
    return this.opts.now() - e.storedAt < e.lifeMs + this.opts.staleMs ? slot : undefined
  }

  /** A fresh slot under `key`: the entry's age is below its lifeMs. */
  getFresh(key: string): Slot | undefined {
    const slot = this.lru.get(key)
    return slot !== undefined && isFresh(slot.entry, this.opts.now()) ? slot : undefined
  }

  /** Stores an entry until lifeMs + staleMs after it was received; false when it does not fit. */
  setEntry(entry: CacheEntry): boolean {
    return this.put(entry.key, { entry, bytes: entry.result })
  }

  /** Stores a filtered variant of `entry` under `key`, living no longer than the entry itself. */
  setVariant(key: string, entry: CacheEntry, bytes: Buffer): boolean {
    return this.put(key, { entry, bytes })
  }

  private put(key: string, slot: Slot): boolean {
    const ttl = slot.entry.storedAt + slot.entry.lifeMs + this.opts.staleMs - this.opts.now()
    if (ttl <= 0 || slotSize(slot, key) > this.opts.maxEntryBytes) return false
    this.lru.set(key, slot, { ttl: Math.ceil(ttl) })
    return this.lru.has(key)
  }

  /** Drops every entry and variant whose key starts with one of `prefixes`; returns how many. */
  dropPrefixes(prefixes: readonly string[]): number {
    const doomed: string[] = []
    for (const key of this.lru.keys()) {
      if (prefixes.some((p) => key.startsWith(p))) doomed.push(key)
    }
    for (const key of doomed) this.lru.delete(key)
    return doomed.length
  }

  delete(key: string): void {
    this.lru.delete(key)
  }

  clear(): void {
    this.lru.clear()
  }

  /** Bytes currently accounted (≤ maxBytes). */
  get bytes(): number {
    return this.lru.calculatedSize
  }

  get size(): number {
    return this.lru.size
  }
}

/** caching.mdx §ttlMs: fresh while now < received + ttl (here capped as lifeMs). */
export function isFresh(entry: CacheEntry, now: number): boolean {
  return now - entry.storedAt < entry.lifeMs
}

function slotSize(slot: Slot, key: string): number {
  return slot.bytes === slot.entry.result
    ? entrySize(slot.entry)
    : slot.bytes.length + key.length + 100
}
