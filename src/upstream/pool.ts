import { GatewayError } from '../errors.js'
import { hashKey, rendezvousScore, replicaSeed } from './hashing.js'
import type { Upstream } from './upstream.js'

/**
 * `balance:` compiled to the rule that picks a replica. For `hash`, where the key comes from (a
 * header or a claim) is ServerBalancing.hash; the stage hands select() the key itself.
 */
export type BalanceMode = 'least-request' | 'round-robin' | 'hash'

/**
 * The replicas one request may go to (a server's main pool, or a route's) and the rule that picks
 * one. Weights are per pool. Selection allocates nothing: it fills a reused scratch array of
 * indexes, which is safe because select() is synchronous.
 */
export class UpstreamPool {
  private readonly weights: readonly number[]
  private readonly seeds: readonly number[]
  /** Smooth weighted round-robin state (nginx ngx_http_upstream_get_peer). */
  private readonly current: number[]
  private readonly scratch: number[] = []

  constructor(
    readonly upstreams: readonly Upstream[],
    weights: readonly number[],
    private readonly mode: BalanceMode,
  ) {
    this.weights = weights
    // Seeds from the URL, not the position: gateways with the same replicas agree on every key.
    this.seeds = upstreams.map((u) => replicaSeed(u.url.href))
    this.current = upstreams.map(() => 0)
  }

  /**
   * Picks a replica with spare capacity, or throws 503 at once: `no_upstream` when none is left
   * (all excluded, or all health-checked down), `overloaded` when the available ones are full.
   * `stream` (subscriptions/listen, 2025-era GET) counts against the replicas' stream budget
   * instead of maxInFlight, and a full budget is `streams_at_capacity`.
   * Panic mode: when every remaining replica is only passively ejected, they are tried anyway,
   * since an ejection is a guess that they might be down (Envoy panic threshold).
   * `key` (hash mode) picks by rendezvous hashing; without a key, least-request is used.
   */
  select(
    exclude: readonly Upstream[] | undefined,
    key: string | undefined,
    stream = false,
  ): Upstream {
    const { upstreams: members, scratch } = this
    scratch.length = 0
    let candidates = 0
    let alive = 0
    let healthy = 0
    for (let i = 0; i < members.length; i++) {
      const u = members[i] as Upstream
      if (exclude !== undefined && exclude.includes(u)) continue
      candidates++
      if (u.health.down) continue
      alive++
      if (u.health.ejected) continue
      healthy++
      if (hasRoom(u, stream)) scratch.push(i)
    }
    if (scratch.length === 0) {
      if (alive === 0)
        throw new GatewayError('no_upstream', candidates === 0 ? undefined : 'all replicas down')
      if (healthy > 0) throw full(stream)
      for (let i = 0; i < members.length; i++) {
        const u = members[i] as Upstream
        if (exclude !== undefined && exclude.includes(u)) continue
        if (u.health.down) continue
        if (hasRoom(u, stream)) scratch.push(i)
      }
      if (scratch.length === 0) throw full(stream)
    }
    if (scratch.length === 1) return members[scratch[0] as number] as Upstream
    if (this.mode === 'round-robin') return this.roundRobin()
    if (this.mode === 'hash' && key !== undefined) return this.rendezvous(key)
    return this.leastRequest(stream)
  }

  /** Smooth weighted round-robin: even spread, weights honoured over every window of sum(w). */
  private roundRobin(): Upstream {
    const { scratch, current, weights } = this
    let total = 0
    let best = -1
    for (const i of scratch) {
      const w = weights[i] as number
      current[i] = (current[i] as number) + w
      total += w
      if (best === -1 || (current[i] as number) > (current[best] as number)) best = i
    }
    current[best] = (current[best] as number) - total
    return this.upstreams[best] as Upstream
  }

  /**
   * Power of two choices over in-flight requests scaled by weight (Envoy least_request); streams
   * compare open streams instead, the load they add being connections rather than work.
   */
  private leastRequest(stream: boolean): Upstream {
    const { scratch, upstreams: members, weights } = this
    const n = scratch.length
    const ai = Math.floor(Math.random() * n)
    let bi = Math.floor(Math.random() * (n - 1))
    if (bi >= ai) bi++
    const a = scratch[ai] as number
    const b = scratch[bi] as number
    const ua = members[a] as Upstream
    const ub = members[b] as Upstream
    const la = stream ? ua.streams : ua.inFlight - ua.streams
    const lb = stream ? ub.streams : ub.inFlight - ub.streams
    return (la + 1) * (weights[b] as number) <= (lb + 1) * (weights[a] as number) ? ua : ub
  }

  /**
   * Weighted rendezvous (highest random weight) hashing: each key goes to the replica with the
   * best score among those available, so a replica going away moves only its own keys.
   */
  private rendezvous(key: string): Upstream {
    const h = hashKey(key)
    let best = -1
    let bestScore = -1
    for (const i of this.scratch) {
      const score = rendezvousScore(h, this.seeds[i] as number, this.weights[i] as number)
      if (score > bestScore) {
        bestScore = score
        best = i
      }
    }
    return this.upstreams[best] as Upstream
  }
}

/**
 * Whether `u` can take one more request of this kind. `inFlight` counts every request on the
 * replica, streams included; only the ordinary ones count against maxInFlight, so idle streams
 * never use up the slots that ordinary requests need.
 */
export function hasRoom(u: Upstream, stream: boolean): boolean {
  return stream ? u.streams < u.maxStreams : u.inFlight - u.streams < u.maxInFlight
}

/**
 * A replica's slot for a long-lived stream the gateway holds open itself, outside the attempt loop
 * (a virtual server's member listen, the GET stream of a session it holds toward a 2025-only
 * member): counted as the attempt loop counts a stream (`inFlight` and `streams`, against
 * `maxStreams`), so balancing, capacity and the status page see it. Throws `streams_at_capacity`
 * when the replica has no room; the release gives the slot back, exactly once.
 */
export function leaseStream(u: Upstream): () => void {
  if (!hasRoom(u, true)) throw full(true)
  u.inFlight++
  u.streams++
  let released = false
  return () => {
    if (released) return
    released = true
    u.inFlight--
    u.streams--
  }
}

/** The 503 for a pool whose available replicas have no room left. */
export function full(stream: boolean): GatewayError {
  return new GatewayError(stream ? 'streams_at_capacity' : 'overloaded')
}
