/** Passive outlier detection (Envoy outlier detection; defaults in config/schema.ts `outlier`). */
export interface OutlierSettings {
  readonly consecutiveFailures: number
  readonly baseEjectionMs: number
  readonly maxEjectionMs: number
}

/** Active check hysteresis: down after N failed checks in a row, up after M passed ones. */
export interface CheckThresholds {
  readonly unhealthyAfter: number
  readonly healthyAfter: number
}

/** A state change, for the log and the `mcp_edge_upstream_healthy` gauge. */
export type HealthEvent = 'down' | 'up' | 'ejected' | 'readmitted'

/** Why a replica takes no traffic, as /readyz shows it. */
export interface ReplicaOut {
  readonly upstream: string
  readonly state: 'down' | 'ejected'
  readonly reason: string
  /** When an ejection ends (ISO time). */
  readonly until?: string
}

/**
 * Health of one replica: active checks (`down`) and passive ejection (`ejected`) are separate
 * states, since /readyz reports both and panic mode treats them differently (an ejected replica
 * may still be tried when nothing else is left; a replica that fails its checks is not).
 */
export class ReplicaHealth {
  down = false
  downReason = ''
  ejected = false
  ejectedUntil = 0
  ejectReason = ''
  private failures = 0
  private ejections = 0
  private checkFailures = 0
  private checkPasses = 0
  private timer: NodeJS.Timeout | undefined

  constructor(
    readonly id: string,
    private readonly outlier: OutlierSettings,
    private readonly checks: CheckThresholds,
    /** False when ejecting this replica would leave its server with none available. */
    private readonly canEject: (h: ReplicaHealth) => boolean,
    private readonly report: (h: ReplicaHealth, event: HealthEvent, detail: string) => void,
  ) {}

  /** The replica answered; its run of failures is over. */
  succeeded(): void {
    this.failures = 0
  }

  /**
   * The replica failed a request in a way that is its own fault: connect failure, reset, timeout,
   * garbage, a 5xx without a JSON-RPC body. Never a 4xx or a backend's JSON-RPC error.
   */
  failed(why: string): void {
    if (++this.failures < this.outlier.consecutiveFailures || this.ejected) return
    // Never eject the last replica that could still answer: a guess that it is down must not
    // turn into a certain outage (docs/balancing.md §Health).
    if (!this.canEject(this)) return
    const now = Date.now()
    // The multiplier decays: a replica that stayed in for a full maximum period starts over at 1.
    this.ejections = now - this.ejectedUntil > this.outlier.maxEjectionMs ? 1 : this.ejections + 1
    const ms = Math.min(this.outlier.baseEjectionMs * this.ejections, this.outlier.maxEjectionMs)
    this.ejected = true
    this.ejectedUntil = now + ms
    this.ejectReason = `${this.failures} consecutive failures, last: ${why}`
    this.failures = 0
    this.timer = setTimeout(() => this.readmit('ejection period over'), ms)
    this.timer.unref()
    this.report(this, 'ejected', `${this.ejectReason}; out for ${ms} ms`)
  }

  /** An active check passed; like Envoy, a passing check also ends a passive ejection. */
  checkPassed(): void {
    this.checkFailures = 0
    if (this.ejected) this.readmit('health check passed')
    if (!this.down || ++this.checkPasses < this.checks.healthyAfter) return
    this.down = false
    this.checkPasses = 0
    this.failures = 0
    this.report(this, 'up', `${this.checks.healthyAfter} health checks passed`)
  }

  /** An active check failed (`why` is safe to show: no addresses). */
  checkFailed(why: string): void {
    this.checkPasses = 0
    if (this.down) {
      this.downReason = `health check failed: ${why}`
      return
    }
    if (++this.checkFailures < this.checks.unhealthyAfter) return
    this.down = true
    this.downReason = `health check failed: ${why}`
    this.checkFailures = 0
    this.report(this, 'down', `${this.checks.unhealthyAfter} health checks failed, last: ${why}`)
  }

  /**
   * Takes the state another process's active checks decided (workers: one checker shares its
   * results, docs/operations.md §Workers); reported like a local change when it is one.
   */
  mirror(down: boolean, reason: string): void {
    if (down) this.downReason = reason
    if (down === this.down) return
    this.down = down
    this.checkFailures = 0
    this.checkPasses = 0
    if (!down) this.failures = 0
    this.report(this, down ? 'down' : 'up', down ? reason : 'health checks passed (checker worker)')
  }

  /** Why the replica is out, or undefined when it takes traffic. */
  out(): ReplicaOut | undefined {
    if (this.down) return { upstream: this.id, state: 'down', reason: this.downReason }
    if (this.ejected) {
      const until = new Date(this.ejectedUntil).toISOString()
      return { upstream: this.id, state: 'ejected', reason: this.ejectReason, until }
    }
    return undefined
  }

  /** Stops the ejection timer. */
  close(): void {
    clearTimeout(this.timer)
  }

  private readmit(why: string): void {
    clearTimeout(this.timer)
    if (!this.ejected) return
    this.ejected = false
    this.failures = 0
    this.report(this, 'readmitted', why)
  }
}
