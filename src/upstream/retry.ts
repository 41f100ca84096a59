/** Upstream statuses that mean "try elsewhere" when they come without a usable JSON-RPC body. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504])

/** `retry:` of a server. */
export interface RetrySettings {
  readonly attempts: number
  readonly budgetPercent: number
  readonly minConcurrent: number
  readonly backoffBaseMs: number
  readonly perTryTimeoutMs?: number | undefined
}

/**
 * Envoy's retry budget (circuit_breaker.proto RetryBudget): retries in progress may not exceed
 * `budgetPercent` of the requests in progress, but `minConcurrent` are always allowed, so a
 * failing replica cannot turn every request into two (docs/design/retries.md §Bounds).
 */
export class RetryBudget {
  /** Requests of this server currently in the attempt loop. */
  active = 0
  /** Retries currently in progress. */
  retrying = 0

  constructor(private readonly settings: RetrySettings) {}

  /** Takes a retry token if the budget allows one; give it back with release(). */
  tryAcquire(): boolean {
    const cap = Math.max(
      this.settings.minConcurrent,
      Math.floor((this.active * this.settings.budgetPercent) / 100),
    )
    if (this.retrying >= cap) return false
    this.retrying++
    return true
  }

  release(): void {
    this.retrying--
  }
}

/** Full-jitter exponential backoff (Envoy router: base 25 ms): uniform in [0, base·2^(n-1)]. */
export function backoffMs(base: number, retry: number): number {
  return Math.random() * base * 2 ** (retry - 1)
}
