import { GatewayError } from '../errors.js'
import type { Upstream } from './upstream.js'

/** What a balancer may look at to choose a replica. */
export interface SelectContext {
  /** Replicas already tried for this request (retries go elsewhere). */
  readonly exclude?: ReadonlySet<Upstream>
}

/** The replicas of one server and the rule that picks one per request. */
export class UpstreamPool {
  private rr = 0

  constructor(
    readonly upstreams: readonly Upstream[],
    private readonly mode: 'least-request' | 'round-robin',
    private readonly maxInFlight: number,
  ) {}

  /** Picks a replica with spare capacity; throws no_upstream / overloaded (503, at once). */
  select(ctx: SelectContext = {}): Upstream {
    const candidates = this.upstreams.filter((u) => ctx.exclude?.has(u) !== true)
    if (candidates.length === 0) throw new GatewayError('no_upstream')
    const open = candidates.filter((u) => u.inFlight < this.maxInFlight)
    if (open.length === 0) throw new GatewayError('overloaded')
    if (open.length === 1) return open[0] as Upstream
    return this.mode === 'round-robin' ? this.roundRobin(open) : this.leastRequest(open)
  }

  /** Weighted round-robin over a deterministic rotation. */
  private roundRobin(open: readonly Upstream[]): Upstream {
    const total = open.reduce((n, u) => n + u.weight, 0)
    let slot = this.rr++ % total
    for (const u of open) {
      slot -= u.weight
      if (slot < 0) return u
    }
    return open[0] as Upstream
  }

  /** Power of two choices on in-flight requests scaled by weight (Envoy/agentgateway P2C). */
  private leastRequest(open: readonly Upstream[]): Upstream {
    const a = open[Math.floor(Math.random() * open.length)] as Upstream
    let b = open[Math.floor(Math.random() * (open.length - 1))] as Upstream
    if (b === a) b = open[open.length - 1] as Upstream
    return (a.inFlight + 1) / a.weight <= (b.inFlight + 1) / b.weight ? a : b
  }

  /** Closes every replica's connections. */
  async close(): Promise<void> {
    await Promise.all(this.upstreams.map((u) => u.close()))
  }
}
