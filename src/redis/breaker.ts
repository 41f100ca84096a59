/** Milliseconds, monotonic where it matters (injected in tests). */
type Clock = () => number

/** When the shared tier is bypassed, and for how long. */
export interface BreakerOptions {
  /** Consecutive failed or timed-out commands that open the circuit. */
  readonly failures: number
  /** First bypass period; it doubles after each failed probe, up to maxOpenMs. */
  readonly openMs: number
  readonly maxOpenMs: number
  readonly now: Clock
}

export const BREAKER_DEFAULTS: Omit<BreakerOptions, 'now'> = {
  failures: 3,
  openMs: 1000,
  maxOpenMs: 30_000,
}

/**
 * A circuit breaker for a dependency that may stop answering without closing its connection (a
 * Redis that is paused, swapping or behind a black-holed route): after `failures` commands in a
 * row fail, commands are skipped for a while instead of each costing its timeout; then one probe
 * goes out, and its outcome closes the circuit or opens it again for twice as long.
 */
export class Breaker {
  private failed = 0
  /** 0 while closed; else the time the current bypass period ends. */
  private openUntil = 0
  private period: number
  private probing = false

  constructor(private readonly opts: BreakerOptions) {
    this.period = opts.openMs
  }

  /** 'pass' while closed, 'probe' for the one command let through after a bypass, else undefined. */
  allow(): 'pass' | 'probe' | undefined {
    if (this.openUntil === 0) return 'pass'
    if (this.probing || this.opts.now() < this.openUntil) return undefined
    this.probing = true
    return 'probe'
  }

  /** A command was answered. True when this closed an open circuit. */
  succeeded(): boolean {
    this.failed = 0
    if (this.openUntil === 0) return false
    this.openUntil = 0
    this.probing = false
    this.period = this.opts.openMs
    return true
  }

  /**
   * A command failed. `probe`: it was the one allow() let through. 'opened' when this opened the
   * circuit, 'reopened' when a probe failed; failures of commands sent before it opened only count
   * while it is closed.
   */
  failedWith(probe: boolean): 'opened' | 'reopened' | undefined {
    if (this.openUntil !== 0) {
      if (!probe) return undefined
      this.probing = false
      this.period = Math.min(this.period * 2, this.opts.maxOpenMs)
      this.openUntil = this.opts.now() + this.period
      return 'reopened'
    }
    if (++this.failed < this.opts.failures) return undefined
    this.openUntil = this.opts.now() + this.period
    return 'opened'
  }

  get isOpen(): boolean {
    return this.openUntil !== 0
  }

  /** The current bypass period (ms). */
  get openMs(): number {
    return this.period
  }
}
