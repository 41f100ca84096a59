import { LRUCache } from 'lru-cache'

interface Stored {
  readonly result: Readonly<Record<string, unknown>>
  readonly storedAt: number
  readonly ttlMs: number
}

/**
 * Merged answers of one virtual server (docs/virtual-servers.md §Cache). Keys carry the method,
 * the cursor, every member's policy view and, for a private answer, the caller's authorization
 * context (caching.mdx §cacheScope: private answers are never shared across contexts). Only
 * complete answers are stored; a hit is served with the ttl left, like the edge cache's.
 */
export class MergedCache {
  private readonly entries: LRUCache<string, Stored>

  constructor(
    private readonly maxTtlMs: number,
    maxEntries = 1000,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.entries = new LRUCache({ max: maxEntries })
  }

  /** The stored result with `ttlMs` set to what is left of it, or undefined. */
  get(key: string): Record<string, unknown> | undefined {
    const e = this.entries.get(key)
    if (e === undefined) return undefined
    const left = e.storedAt + e.ttlMs - this.now()
    if (left <= 0) {
      this.entries.delete(key)
      return undefined
    }
    return { ...e.result, ttlMs: Math.floor(left) }
  }

  set(key: string, result: Readonly<Record<string, unknown>>, ttlMs: number): void {
    const life = Math.min(ttlMs, this.maxTtlMs)
    if (life <= 0) return
    this.entries.set(key, { result, storedAt: this.now(), ttlMs: life })
  }

  /** Drops every merged answer (a member's list changed). */
  clear(): void {
    this.entries.clear()
  }
}
