import type { Logger } from 'pino'
import { BUCKET_BYTES, RateTable, SlotTable, type Clock } from './local.js'
import { RedisRates } from './redis.js'

/** Options of {@link LimitState}. */
export interface LimitStateOptions {
  readonly log: Logger
  /** Bytes the in-memory buckets of all limits may take together (`rateLimits.memoryBytes`). */
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
 * hand every caller a fresh burst: one bucket table per limit (rates and in-flight counts), and
 * the Redis connection (replaced only when its URL changes).
 */
export class LimitState {
  readonly now: Clock
  readonly onFallback: () => void
  readonly #memoryBytes: number
  /** By limit id (`name#hash`): an edited limit is another id, with fresh buckets. */
  readonly #rates = new Map<string, RateTable>()
  readonly #slots = new Map<string, SlotTable>()
  #redis: RedisRates | undefined
  #redisUrl: string | undefined
  #redisTimeoutMs: number | undefined

  constructor(private readonly opts: LimitStateOptions) {
    this.#memoryBytes = opts.memoryBytes ?? DEFAULT_MEMORY_BYTES
    this.now = opts.now ?? Date.now
    this.onFallback = opts.onFallback ?? (() => undefined)
  }

  /**
   * Buckets each of `limits` limits may hold: an equal share of `memoryBytes`, so that the tables
   * together stay within it (docs/rate-limits.md §Memory), in memory and in Redis alike.
   */
  capacityFor(limits: number): number {
    return Math.max(1, Math.floor(this.#memoryBytes / BUCKET_BYTES / Math.max(1, limits)))
  }

  /** The rate table of limit `id`, made on first use; `capacity` replaces the one it had. */
  rateTable(id: string, capacity: number): RateTable {
    let table = this.#rates.get(id)
    if (table === undefined) this.#rates.set(id, (table = new RateTable(capacity)))
    else table.capacity = capacity
    return table
  }

  /** The in-flight table of limit `id`, as rateTable. */
  slotTable(id: string, capacity: number): SlotTable {
    let table = this.#slots.get(id)
    if (table === undefined) this.#slots.set(id, (table = new SlotTable(capacity)))
    else table.capacity = capacity
    return table
  }

  /**
   * Forgets the tables of limits no longer in `ids` (a reload removed or edited them), but only
   * once nothing in them differs from a fresh table: a rejected reload that briefly compiled
   * other limits must not cost the live ones their state.
   */
  retain(ids: ReadonlySet<string>): void {
    const now = this.now()
    for (const [id, table] of this.#rates)
      if (!ids.has(id) && table.idle(now)) this.#rates.delete(id)
    for (const [id, table] of this.#slots)
      if (!ids.has(id) && table.size === 0) this.#slots.delete(id)
  }

  get redis(): RedisRates | undefined {
    return this.#redis
  }

  /**
   * Connects to (or keeps) the Redis of the current config, whose commands wait at most
   * `commandTimeoutMs`; undefined disconnects.
   */
  useRedis(url: string | undefined, commandTimeoutMs?: number): void {
    if (url === this.#redisUrl && commandTimeoutMs === this.#redisTimeoutMs) return
    this.#redis?.close()
    this.#redisUrl = url
    this.#redisTimeoutMs = commandTimeoutMs
    this.#redis =
      url === undefined
        ? undefined
        : new RedisRates({
            url,
            log: this.opts.log,
            ...(commandTimeoutMs !== undefined && { commandTimeoutMs }),
            ...(this.opts.now && { now: this.opts.now }),
          })
  }

  draining(): boolean {
    return this.opts.draining?.() ?? false
  }

  close(): void {
    this.useRedis(undefined)
  }
}
