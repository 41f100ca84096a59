/** The first caller for a key: it does the work and must settle, whatever happens. */
export interface Leader<T> {
  readonly leader: true
  /** Wakes every waiter with `value` (undefined = nothing they can use); later calls are no-ops. */
  settle(value: T | undefined): void
}

/** A later caller for the same key: waits for the leader's outcome. */
export interface Waiter<T> {
  readonly leader: false
  readonly wait: Promise<T | undefined>
}

/**
 * Collapses concurrent misses for one key into one upstream request (reliability C-6: 500 cold
 * identical lists make exactly one backend request). The leader's own answer goes to its client
 * through the proxy as usual; waiters get what the leader stored, or undefined when its answer was
 * not cacheable (or failed), and then decide for themselves.
 */
export class SingleFlight<T> {
  private readonly flights = new Map<
    string,
    { readonly promise: Promise<T | undefined>; waiters: number }
  >()
  private waiting = 0

  /** Joins the flight for `key`, or starts it. */
  begin(key: string): Leader<T> | Waiter<T> {
    const running = this.flights.get(key)
    if (running !== undefined) {
      running.waiters++
      this.waiting++
      return { leader: false, wait: running.promise }
    }
    let wake!: (value: T | undefined) => void
    const flight = {
      promise: new Promise<T | undefined>((resolve) => (wake = resolve)),
      waiters: 0,
    }
    this.flights.set(key, flight)
    let settled = false
    return {
      leader: true,
      settle: (value) => {
        if (settled) return
        settled = true
        if (this.flights.get(key) === flight) this.flights.delete(key)
        this.waiting -= flight.waiters
        wake(value)
      },
    }
  }

  /** Flights in progress (for tests and metrics). */
  get size(): number {
    return this.flights.size
  }

  /** Callers waiting on a flight right now. */
  get waiters(): number {
    return this.waiting
  }
}
