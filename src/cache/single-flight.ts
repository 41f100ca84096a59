/** The first caller for a key: it does the work and must settle, whatever happens. */
export interface Leader<T> {
  readonly leader: true
  /** Wakes every waiter with `value` (undefined = nothing they can use); later calls are no-ops. */
  settle(value: T | undefined): void
}

/** A later caller for the same key: waits for the leader's outcome, for a bounded time. */
export interface Waiter<T> {
  readonly leader: false
  /**
   * The leader's outcome, or TIMED_OUT when it has not come within `ms`. Each waiter has its own
   * deadline: a leader held up by a slow backend or a slow client never holds the others longer.
   */
  wait(ms: number): Promise<T | undefined | typeof TIMED_OUT>
}

/** What Waiter.wait resolves to when the deadline passed first. */
export const TIMED_OUT: unique symbol = Symbol('single-flight wait timed out')

interface Flight<T> {
  readonly promise: Promise<T | undefined>
  waiters: number
  settled: boolean
}

/**
 * Collapses concurrent misses for one key into one upstream request (500 cold identical lists make
 * exactly one backend request, docs/cache.md §Single flight). The leader's own answer goes to its
 * client through the proxy as usual; waiters get what the leader stored, or undefined when its
 * answer was not cacheable (or failed), and then decide for themselves. A waiter that times out
 * stops counting as one and goes its own way.
 */
export class SingleFlight<T> {
  private readonly flights = new Map<string, Flight<T>>()
  private waiting = 0

  /** Joins the flight for `key`, or starts it. */
  begin(key: string): Leader<T> | Waiter<T> {
    const running = this.flights.get(key)
    if (running !== undefined) return this.join(running)
    let wake!: (value: T | undefined) => void
    const flight: Flight<T> = {
      promise: new Promise<T | undefined>((resolve) => (wake = resolve)),
      waiters: 0,
      settled: false,
    }
    this.flights.set(key, flight)
    return {
      leader: true,
      settle: (value) => {
        if (flight.settled) return
        flight.settled = true
        if (this.flights.get(key) === flight) this.flights.delete(key)
        this.waiting -= flight.waiters
        flight.waiters = 0
        wake(value)
      },
    }
  }

  private join(flight: Flight<T>): Waiter<T> {
    flight.waiters++
    this.waiting++
    return {
      leader: false,
      wait: (ms) => {
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<typeof TIMED_OUT>((resolve) => {
          timer = setTimeout(() => {
            if (!flight.settled) {
              flight.waiters--
              this.waiting--
            }
            resolve(TIMED_OUT)
          }, ms)
        })
        return Promise.race([flight.promise, late]).finally(() => clearTimeout(timer))
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
