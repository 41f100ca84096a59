import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { Breaker, BREAKER_DEFAULTS } from '../redis/breaker.js'
import type { GcraResult, Rate } from './gcra.js'
import { GCRA_SCRIPT, GCRA_SCRIPT_SHA } from './redis-script.js'
import { connectRedis } from '../redis/client.js'

/** One rate check decided in Redis: the limit's table, the bucket in it, rate and room. */
export interface SharedCheck {
  /** The limit's id (`name#hash`, at most 77 characters): one sorted set per limit. */
  readonly table: string
  /** A fixed-size digest of the key value (limits/key.ts). */
  readonly key: string
  readonly rate: Rate
  /** Most buckets the limit's table may hold (LimitState.capacityFor). */
  readonly capacity: number
}

/** Options of {@link RedisRates}. */
export interface RedisRatesOptions {
  readonly url: string
  readonly log: Logger
  /** Keyspace prefix; replicas that share limits use the same one. */
  readonly prefix?: string
  /** Longest wait for one decision; past it the request is decided locally. */
  readonly commandTimeoutMs?: number
  readonly now?: () => number
}

/**
 * Rate limits shared by every replica through one Redis. Never on the critical path
 * (docs/rate-limits.md §Redis): no offline queue, no retries, a short command timeout and the
 * cache's circuit breaker (redis/breaker.ts); whenever Redis cannot decide, decide() answers
 * undefined and the caller decides locally, with the rate split between replicas.
 */
export class RedisRates {
  private readonly client: Redis
  private readonly prefix: string
  private readonly breaker: Breaker
  private down = false

  constructor(private readonly opts: RedisRatesOptions) {
    // rl2: one sorted set per limit, digests as members (rl1 held one string per key value).
    this.prefix = opts.prefix ?? 'mcp-edge:rl2:'
    this.breaker = new Breaker({ ...BREAKER_DEFAULTS, now: opts.now ?? Date.now })
    this.client = connectRedis(opts.url, opts.commandTimeoutMs ?? 100)
    this.client.on('error', (err: Error) => this.fellBack(err))
    this.client.on('ready', () => {
      this.opts.log.info('rate limits: redis connected; limits shared by every replica')
      this.down = false
    })
  }

  /** True while Redis is connected and not bypassed by the breaker. */
  get available(): boolean {
    return this.client.status === 'ready' && !this.breaker.isOpen
  }

  /** One round trip for all checks; undefined when Redis cannot decide (fall back locally). */
  async decide(checks: readonly SharedCheck[]): Promise<GcraResult[] | undefined> {
    if (this.client.status !== 'ready') return undefined
    const pass = this.breaker.allow()
    if (pass === undefined) return undefined
    // SECURITY: fixed-size keys and members only (a limit id, a digest), whatever the caller sent.
    const keys = checks.map((c) => this.prefix + c.table)
    const args: (string | number)[] = []
    for (const c of checks) args.push(c.key, c.rate.intervalMs, c.rate.burst, c.capacity)
    try {
      const reply = await this.evaluate(keys, args)
      if (this.breaker.succeeded()) this.opts.log.info('rate limits: redis answers again')
      this.down = false
      return toResults(reply, checks.length)
    } catch (err) {
      const change = this.breaker.failedWith(pass === 'probe')
      if (change === 'opened') this.fellBack(err)
      return undefined
    }
  }

  private async evaluate(keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await this.client.evalsha(GCRA_SCRIPT_SHA, keys.length, ...keys, ...args)
    } catch (err) {
      // First use on this Redis (or after SCRIPT FLUSH / a restart): send the script itself.
      if (!String(err).includes('NOSCRIPT')) throw err
      return await this.client.eval(GCRA_SCRIPT, keys.length, ...keys, ...args)
    }
  }

  private fellBack(err: unknown): void {
    if (this.down) return
    this.down = true
    this.opts.log.warn(
      { err: String(err) },
      'rate limits: redis unavailable; limits held per replica (rateLimits.replicas share)',
    )
  }

  close(): void {
    this.client.disconnect()
  }
}

function toResults(reply: unknown, n: number): GcraResult[] {
  if (!Array.isArray(reply) || reply.length !== 1 + 4 * n) throw new Error('bad script reply')
  const allowed = reply[0] === 1
  const out: GcraResult[] = []
  for (let i = 0; i < n; i++) {
    const status = Number(reply[1 + 4 * i])
    const remaining = Number(reply[2 + 4 * i])
    const retryAfterMs = Number(reply[3 + 4 * i])
    const resetMs = Number(reply[4 + 4 * i])
    out.push({
      // A check that passed on its own is still refused when another check of the request was.
      allowed: allowed || status === 0,
      full: status === 2,
      tat: 0,
      remaining,
      retryAfterMs,
      resetMs,
    })
  }
  return out
}
