import { copyMap, type Writes } from './copy-on-write.js'

/**
 * A map of the policy index (names, heads, tails, claim values: 10,000 entries for a 10,000-rule
 * policy) split into shards by a cheap hash of the key, so that a reload's patch copies the one
 * shard a changed key is in rather than the whole map (copy-on-write.ts, docs/policy.md §Hot
 * reload). A map of a few hundred entries is one shard, and a lookup into it hashes nothing.
 *
 * Which shard a key is in decides nothing: every key is looked up in the shard it was filed in,
 * by the same function, and found there exactly as a Map finds it (SameValueZero).
 */
export class ShardedMap<K, V> {
  /** A power of two in length; each shard's to change only as `w.own()` of it. */
  private shards: Map<K, V>[] = [new Map()]
  private count = 0

  get size(): number {
    return this.count
  }

  get(key: K): V | undefined {
    return this.shardOf(key).get(key)
  }

  has(key: K): boolean {
    return this.shardOf(key).has(key)
  }

  /** Sets `key` where `w` may change: the shard it is in copied first when it is not `w`'s. */
  set(key: K, value: V, w: Writes): void {
    const shard = this.writable(key, w)
    if (!shard.has(key)) this.count++
    shard.set(key, value)
    if (this.count > MAX_SHARD * this.shards.length && this.shards.length < MAX_SHARDS)
      this.spread(w)
  }

  /** Deletes `key` where `w` may change, as set(). */
  delete(key: K, w: Writes): void {
    if (!this.shardOf(key).has(key)) return
    this.writable(key, w).delete(key)
    this.count--
  }

  /** A copy sharing every shard with this one: a patch's (`w.own(map, copy)`). */
  copy(): ShardedMap<K, V> {
    const out = new ShardedMap<K, V>()
    out.shards = [...this.shards]
    out.count = this.count
    return out
  }

  *[Symbol.iterator](): IterableIterator<[K, V]> {
    for (const shard of this.shards) yield* shard
  }

  /** Where `key` is filed: a one-shard map hashes nothing. */
  private at(key: K): number {
    const n = this.shards.length
    return n === 1 ? 0 : hashOf(key) & (n - 1)
  }

  private shardOf(key: K): Map<K, V> {
    return this.shards[this.at(key)] as Map<K, V>
  }

  /** The shard of `key`, `w`'s own to change. */
  private writable(key: K, w: Writes): Map<K, V> {
    // SECURITY: the shards array and each shard may be the running policy's: changed only as
    // this patch's own copies (a patch that wrote into them would change the running policy).
    w.check(this)
    const at = this.at(key)
    const shard = w.own(this.shards[at] as Map<K, V>, copyMap)
    this.shards[at] = shard
    return shard
  }

  /**
   * Twice as many shards, every entry filed again: when the map has grown past MAX_SHARD entries
   * a shard on average. Rare (each doubling of the map), and all of it this one's own.
   */
  private spread(w: Writes): void {
    const shards = Array.from({ length: this.shards.length * 2 }, () => w.fresh(new Map<K, V>()))
    const mask = shards.length - 1
    for (const shard of this.shards)
      for (const [k, v] of shard) (shards[hashOf(k) & mask] as Map<K, V>).set(k, v)
    this.shards = shards
  }
}

/** Entries a shard holds on average before the map doubles its shards: what a patch copies. */
const MAX_SHARD = 256
/** At most this many shards (a map of a million entries has shards of 256). */
const MAX_SHARDS = 4096

/**
 * A hash of `key` consistent with SameValueZero: a string by up to 16 of its characters, spread
 * over it (a bounded cost per lookup, whatever its length); a number by its integer part (0 and
 * -0, and NaN, hash alike); anything else to 0.
 */
export function hashOf(key: unknown): number {
  if (typeof key === 'number') return key | 0
  if (typeof key !== 'string') return 0
  const n = key.length
  const step = n <= 16 ? 1 : n >>> 4
  let h = n
  for (let i = n - 1; i >= 0; i -= step) h = Math.imul(h ^ key.charCodeAt(i), 0x9e3779b1)
  return h ^ (h >>> 15)
}
