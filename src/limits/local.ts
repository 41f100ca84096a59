import { LRUCache } from 'lru-cache'
import { gcra, type GcraResult, type Rate } from './gcra.js'

/** Milliseconds; injected in tests. */
export type Clock = () => number

/** One rate check of a request: the state key and the rate that applies to it. */
export interface RateCheck {
  readonly key: string
  readonly rate: Rate
}

/**
 * GCRA state of one gateway replica: one number per key in a bounded LRU (bytes, counted by key
 * length), each entry dropped once its key is idle again (its TAT is past: forgetting it changes
 * nothing). No timers: lru-cache checks ages when it is read, on the injected clock.
 */
export class LocalRates {
  private readonly tats: LRUCache<string, number>

  constructor(
    maxBytes: number,
    private readonly now: Clock,
  ) {
    this.tats = new LRUCache<string, number>({
      maxSize: maxBytes,
      // A key costs its text plus the map entry and the number (about 64 bytes in V8).
      sizeCalculation: (_v, k) => k.length * 2 + 64,
      ttlAutopurge: false,
      perf: { now },
    })
  }

  /** All checks pass or none is counted (several limits on one request are all-or-nothing). */
  decide(checks: readonly RateCheck[]): GcraResult[] {
    const now = this.now()
    const results: GcraResult[] = []
    let allowed = true
    for (const c of checks) {
      const r = gcra(c.rate, this.tats.get(c.key), now)
      results.push(r)
      if (!r.allowed) allowed = false
    }
    if (allowed) {
      for (let i = 0; i < checks.length; i++) {
        const r = results[i] as GcraResult
        // Kept exactly as long as the key is not idle (resetMs), plus one ms of rounding.
        this.tats.set((checks[i] as RateCheck).key, r.tat, { ttl: Math.ceil(r.resetMs) + 1 })
      }
    }
    return results
  }

  get size(): number {
    return this.tats.size
  }
}

/**
 * In-flight requests per key of one replica. An entry exists only while a request holds a slot,
 * so the map is bounded by the requests in flight. Each slot is given back exactly once.
 */
export class Concurrency {
  private readonly inFlight = new Map<string, number>()

  /** Takes a slot under `max`; undefined when the key is at `max`. */
  acquire(key: string, max: number): (() => void) | undefined {
    const n = this.inFlight.get(key) ?? 0
    if (n >= max) return undefined
    this.inFlight.set(key, n + 1)
    let held = true
    return () => {
      if (!held) return
      held = false
      const left = (this.inFlight.get(key) ?? 1) - 1
      if (left <= 0) this.inFlight.delete(key)
      else this.inFlight.set(key, left)
    }
  }

  held(key: string): number {
    return this.inFlight.get(key) ?? 0
  }
}
