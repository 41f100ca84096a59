import type { Logger } from 'pino'
import { Concurrency, LocalRates, type Clock } from './local.js'
import { RedisRates } from './redis.js'

/** Options of {@link LimitState}. */
export interface LimitStateOptions {
  readonly log: Logger
  /** Bytes the in-memory buckets may take (`rateLimits.memoryBytes`). */
  readonly memoryBytes?: number
  readonly now?: Clock
  /** Called for every decision taken locally while Redis is configured (a metric counts them). */
  readonly onFallback?: () => void
  /** Whether the gateway is shutting down (then closing a runtime closes the state too). */
  readonly draining?: () => boolean
}

const DEFAULT_MEMORY_BYTES = 16 * 1024 * 1024

/**
 * Rate-limit state of one gateway process, kept across config reloads so that an edit does not
 * hand every caller a fresh burst: the local buckets, the in-flight counts and the Redis
 * connection (replaced only when its URL changes).
 */
export class LimitState {
  readonly local: LocalRates
  readonly concurrency = new Concurrency()
  readonly onFallback: () => void
  #redis: RedisRates | undefined
  #redisUrl: string | undefined

  constructor(private readonly opts: LimitStateOptions) {
    this.local = new LocalRates(opts.memoryBytes ?? DEFAULT_MEMORY_BYTES, opts.now ?? Date.now)
    this.onFallback = opts.onFallback ?? (() => undefined)
  }

  get redis(): RedisRates | undefined {
    return this.#redis
  }

  /** Connects to (or keeps) the Redis of the current config; undefined disconnects. */
  useRedis(url: string | undefined): void {
    if (url === this.#redisUrl) return
    this.#redis?.close()
    this.#redisUrl = url
    this.#redis =
      url === undefined
        ? undefined
        : new RedisRates({ url, log: this.opts.log, ...(this.opts.now && { now: this.opts.now }) })
  }

  draining(): boolean {
    return this.opts.draining?.() ?? false
  }

  close(): void {
    this.useRedis(undefined)
  }
}
