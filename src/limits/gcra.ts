/**
 * GCRA (generic cell rate algorithm, ITU-T I.371 "virtual scheduling"): a rate limit held as one
 * number per key, the theoretical arrival time (TAT) of the next request. No timers and no
 * refill loop: the state is only read and moved on when a request arrives, so an idle key costs
 * nothing and can be forgotten once its TAT is in the past.
 *
 * With emission interval T = period / count and capacity B (`burst`), a request at `now` is
 * allowed when max(TAT, now) + T - now <= B·T, and then TAT becomes max(TAT, now) + T. B requests
 * pass at once from an idle key; after that one every T. The same arithmetic runs in Redis
 * (limits/redis-script.ts), so both answer alike.
 */

/** A rate as compiled from `rate: N/unit` and `burst`. */
export interface Rate {
  /** Emission interval in ms (period / count), fractional. */
  readonly intervalMs: number
  /** Requests that may pass at once from an idle key (>= 1). */
  readonly burst: number
}

/** The outcome of one GCRA check. */
export interface GcraResult {
  readonly allowed: boolean
  /** Refused because the limit's table has no room for a new key (limits/local.ts RateTable). */
  readonly full: boolean
  /** The TAT to store when allowed (unchanged state when not). */
  readonly tat: number
  /** Requests that would still pass right now after this one (0 when refused). */
  readonly remaining: number
  /** Refused: ms until one request would pass. Allowed: 0. */
  readonly retryAfterMs: number
  /** ms until the key is idle again (full burst available). */
  readonly resetMs: number
}

/** One check. `tat` is the stored state (undefined for an unknown or forgotten key). */
export function gcra(rate: Rate, tat: number | undefined, now: number): GcraResult {
  const base = tat === undefined || tat < now ? now : tat
  const next = base + rate.intervalMs
  const capacity = rate.burst * rate.intervalMs
  const ahead = next - now
  if (ahead > capacity + EPSILON) {
    return {
      allowed: false,
      full: false,
      tat: base,
      remaining: 0,
      retryAfterMs: ahead - capacity,
      resetMs: base - now,
    }
  }
  return {
    allowed: true,
    full: false,
    tat: next,
    remaining: Math.max(0, Math.floor((capacity - ahead) / rate.intervalMs + EPSILON)),
    retryAfterMs: 0,
    resetMs: ahead,
  }
}

/** Floating-point slack: 7/second has T = 142.857… ms; sums of it must not refuse the 7th request. */
const EPSILON = 1e-6

/** A rate of `count` per `periodMs` with capacity `burst`, divided among `share` replicas. */
export function rateOf(count: number, periodMs: number, burst: number, share = 1): Rate {
  // Each of `share` replicas holds 1/share of the rate and of the burst (at least one request).
  return {
    intervalMs: (periodMs / count) * share,
    burst: Math.max(1, Math.floor(burst / share)),
  }
}
