/**
 * Hashing for `balance: {hash: …}`: FNV-1a over the key, finished with the murmur3 avalanche step
 * (fmix32) so nearby keys land far apart. Not a security boundary: the key only picks a replica.
 */

/** 32-bit hash of a balancing key (a header value or a claim). */
export function hashKey(key: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return fmix32(h)
}

/** Per-replica seed, from its URL so every gateway with the same replicas agrees. */
export function replicaSeed(url: string): number {
  return hashKey(`replica:${url}`)
}

/**
 * Weighted rendezvous score (Schindelhauer & Schomaker's logarithmic method): -w / ln(u) with u
 * uniform in (0, 1) per (key, replica); the highest score wins, and each replica wins a share of
 * keys proportional to its weight.
 */
export function rendezvousScore(keyHash: number, seed: number, weight: number): number {
  const u = ((fmix32(keyHash ^ seed) >>> 0) + 0.5) / 4294967296
  return -weight / Math.log(u)
}

function fmix32(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
