import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { Breaker, BREAKER_DEFAULTS, type BreakerOptions } from '../redis/breaker.js'
import type { SharedTier, SharedTierStatus, SharedValue } from './shared.js'
import type { Clock } from './store.js'
import { connectRedis } from '../redis/client.js'

/** Shared-tier events counted in the cache metrics. */
type RedisEvent = 'shared_error' | 'shared_bypass'

/** Options of {@link RedisTier}. */
export interface RedisTierOptions {
  readonly url: string
  /** Values larger than this are neither written nor read (cache.maxEntryBytes + header). */
  readonly maxValueBytes: number
  readonly log: Logger
  /** Keyspace prefix; replicas that share entries use the same one. */
  readonly prefix?: string
  /** Longest wait for one command; past it the request carries on memory-only. */
  readonly commandTimeoutMs?: number
  /** When Redis is bypassed after failures (defaults: BREAKER_DEFAULTS). */
  readonly breaker?: Partial<Omit<BreakerOptions, 'now'>>
  readonly now?: Clock
  readonly onEvent?: (event: RedisEvent) => void
  /** Longest wait at start for the first connection (default START_WAIT_MS). */
  readonly startWaitMs?: number
}

/**
 * How long a starting gateway waits for its first Redis connection before it listens: ioredis's
 * connect timeout, and the ready check after it (a Redis that accepts and never answers).
 */
const START_WAIT_MS = 2500

/** Prefix drops remembered while Redis cannot take them; past this many, everything is dropped. */
const MAX_PENDING_DROPS = 1024
const SKIPPED = Symbol('skipped')

/**
 * Redis as the shared tier (ioredis). Same keys as the memory tier under a prefix, expiry by PX.
 * SECURITY/availability: Redis is never on the critical path: no offline queue, no per-request
 * retries, a short command timeout, and a circuit breaker: a Redis that stops answering (paused,
 * black-holed) is bypassed for a while instead of costing every miss its command timeout. Drops
 * that could not reach it are replayed before it is read again, so an invalidated entry is never
 * served from it afterwards (docs/cache.md §Shared tier).
 */
export class RedisTier implements SharedTier {
  private readonly client: Redis
  private readonly prefix: string
  private readonly breaker: Breaker
  private degraded = false
  /** Key prefixes whose drop has not reached Redis yet ('' = all of ours). */
  private readonly pending = new Set<string>()
  private replaying = false
  /** The replay in progress, if any. */
  private replayed: Promise<void> | undefined
  /** Settles when the first connection attempt has (connect()). */
  private readonly started: Promise<void>
  /** When a starting gateway stops waiting for the shared tier (connect()). */
  private readonly startBy: number

  constructor(private readonly opts: RedisTierOptions) {
    this.prefix = opts.prefix ?? 'mcp-edge:c1:'
    this.breaker = new Breaker({ ...BREAKER_DEFAULTS, ...opts.breaker, now: opts.now ?? Date.now })
    this.client = connectRedis(opts.url, opts.commandTimeoutMs ?? 250)
    const wait = opts.startWaitMs ?? START_WAIT_MS
    this.startBy = performance.now() + wait
    this.started = firstAttempt(this.client, wait)
    this.client.on('error', (err: Error) => this.degrade(err))
    this.client.on('ready', () => {
      if (this.degraded) this.opts.log.info('cache: redis is back; shared tier active again')
      else this.opts.log.debug('cache: redis connected')
      this.degraded = false
      void this.replay()
    })
  }

  /**
   * The connection is made when the tier is built (ioredis connects at once); this is the wait a
   * starting gateway does before it listens, so its first requests already use the shared tier
   * (docs/cache.md §Shared tier). Bounded, and it never fails: without Redis the gateway starts
   * memory-only and connects in the background. Drops that came while it was connecting (a
   * listen stream acknowledged first drops what it covers) are sent before it resolves: until
   * they are through, the tier is not read.
   */
  async connect(): Promise<void> {
    await this.started
    if (this.client.status !== 'ready') return
    void this.replay()
    const replayed = this.replayed
    if (replayed !== undefined) await settledWithin(replayed, this.startBy - performance.now())
  }

  status(): SharedTierStatus {
    if (this.client.status !== 'ready') return { state: 'connecting' }
    if (this.breaker.isOpen) return { state: 'bypassed', reason: 'not_answering' }
    if (this.pending.size > 0 || this.replaying) return { state: 'bypassed', reason: 'catching_up' }
    return { state: 'connected' }
  }

  async get(key: string): Promise<SharedValue | undefined> {
    // SECURITY: not read while drops it missed are outstanding; it may hold invalidated entries.
    if (this.pending.size > 0 || this.replaying) {
      void this.replay()
      if (this.client.status === 'ready') this.opts.onEvent?.('shared_bypass')
      return undefined
    }
    const k = this.prefix + key
    const res = await this.run(async () => {
      const replies = await this.client.pipeline().getBuffer(k).pttl(k).exec()
      // A pipeline resolves with each command's error in its reply (a timeout among them).
      const failed = replies?.find(([err]) => err !== null)?.[0]
      if (failed !== undefined) throw failed
      return replies
    })
    if (res === SKIPPED) return undefined
    const value = res?.[0]?.[1]
    const pttl = res?.[1]?.[1]
    if (!Buffer.isBuffer(value) || typeof pttl !== 'number') return undefined
    // SECURITY: bounded on the way in too, whoever wrote it.
    if (value.length > this.opts.maxValueBytes) return undefined
    return { value, pttl }
  }

  set(key: string, value: Buffer, pxMs: number): void {
    if (value.length > this.opts.maxValueBytes || pxMs <= 0) return
    void this.run(() => this.client.set(this.prefix + key, value, 'PX', Math.ceil(pxMs)))
  }

  delete(key: string): void {
    void this.run(() => this.client.unlink(this.prefix + key))
  }

  async dropPrefixes(prefixes: readonly string[]): Promise<void> {
    const done = await this.run(() => this.dropAll(prefixes))
    if (done === SKIPPED) this.remember(prefixes)
  }

  private async dropAll(prefixes: readonly string[]): Promise<void> {
    for (const p of prefixes) await this.dropMatching(`${escapeGlob(this.prefix + p)}*`)
  }

  /** SCAN + UNLINK: never KEYS, which blocks Redis for the whole keyspace. */
  private async dropMatching(pattern: string): Promise<void> {
    let cursor = '0'
    do {
      const [next, keys] = await this.client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
      if (keys.length > 0) await this.client.unlink(...keys)
      cursor = next
    } while (cursor !== '0')
  }

  private remember(prefixes: readonly string[]): void {
    if (this.pending.has('')) return
    for (const p of prefixes) this.pending.add(p)
    if (this.pending.size > MAX_PENDING_DROPS) {
      this.pending.clear()
      this.pending.add('')
    }
  }

  /** Sends the drops Redis missed, once it answers again; reads resume when they are through. */
  private replay(): Promise<void> {
    if (this.replaying || this.pending.size === 0) return this.replayed ?? Promise.resolve()
    const prefixes = [...this.pending]
    this.replaying = true
    this.pending.clear()
    this.replayed = this.run(() => this.dropAll(prefixes)).then(
      (done) => {
        if (done === SKIPPED) this.remember(prefixes)
        this.replaying = false
        this.replayed = undefined
      },
      () => {
        this.replaying = false
        this.replayed = undefined
      },
    )
    return this.replayed
  }

  /**
   * Runs one command through the breaker: SKIPPED when Redis is not connected, bypassed, or the
   * command failed (each failure counted; enough in a row open the circuit).
   */
  private async run<T>(command: () => Promise<T>): Promise<T | typeof SKIPPED> {
    if (this.client.status !== 'ready') return SKIPPED
    const pass = this.breaker.allow()
    if (pass === undefined) {
      this.opts.onEvent?.('shared_bypass')
      return SKIPPED
    }
    try {
      const value = await command()
      if (this.breaker.succeeded()) {
        this.opts.log.info('cache: redis answers again; shared tier active again')
        void this.replay()
      }
      return value
    } catch (err) {
      this.opts.onEvent?.('shared_error')
      const change = this.breaker.failedWith(pass === 'probe')
      if (change === 'opened') {
        this.opts.log.warn(
          { err: String(err), bypassMs: this.breaker.openMs },
          'cache: redis is not answering; bypassing it',
        )
      } else if (change === 'reopened') {
        this.opts.log.debug(
          { err: String(err), bypassMs: this.breaker.openMs },
          'cache: redis still not answering',
        )
      }
      return SKIPPED
    }
  }

  async close(): Promise<void> {
    this.client.disconnect()
  }

  private degrade(err: unknown): void {
    if (this.degraded) return
    this.degraded = true
    this.opts.log.warn({ err: String(err) }, 'cache: redis unavailable; serving from memory only')
  }
}

/** Resolves when `client` is ready, its first attempt failed, or after `ms`, whichever is first. */
function firstAttempt(client: Redis, ms: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve()
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      client.off('ready', done)
      client.off('error', done)
      client.off('end', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    timer.unref()
    client.once('ready', done)
    client.once('error', done)
    client.once('end', done)
  })
}

/** Resolves when `promise` settles or after `ms`, whichever is first; never rejects. */
function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms)
    timer.unref()
  })
  return Promise.race([promise.then(noop, noop), late]).finally(() => clearTimeout(timer))
}

function noop(): void {}

/** Redis glob patterns treat these as special; keys are matched literally. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)
}
