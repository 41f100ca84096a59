import type { ErrorCode } from '../errors.js'
import type { McpTarget } from '../mcp/classify.js'
import type { PolicyCaller } from '../match/claims.js'
import { rateOf, type GcraResult, type Rate } from './gcra.js'
import { policyItem, retryAfterSeconds, stateItem } from './headers.js'
import { bucketKey } from './key.js'
import { decideLocal, type RateTable, type SlotTable } from './local.js'
import type { LimitState } from './state.js'
import { limitApplies, type CompiledLimit, type LimitKey } from './rules.js'

/** What the rate-limit stage asks about one request. */
export interface LimitRequest {
  readonly server: string
  readonly caller: PolicyCaller | undefined
  readonly method: string | undefined
  readonly targets: readonly McpTarget[]
  /** The bucket of a key spec for this request (claim value, header value, address, ''). */
  readonly keyValue: (key: LimitKey) => string
}

/** Why a limit refused: over its rate or concurrency, or its table had no room for a new key. */
export type LimitRefusal = Extract<ErrorCode, 'rate_limited' | 'rate_limit_table_full'>

/** The answer for one request. */
export interface LimitVerdict {
  /** The first limit that refused, or undefined when every limit passed. */
  readonly refused: CompiledLimit | undefined
  /** The error code of the refusal (undefined when every limit passed). */
  readonly reason: LimitRefusal | undefined
  /** `Retry-After`, `RateLimit-Policy`, `RateLimit` (empty when no rate limit applied). */
  readonly headers: Readonly<Record<string, string>>
  /** Gives back the concurrency slots taken (exactly once); undefined when none were. */
  readonly release: (() => void) | undefined
  /** True when Redis is configured but this decision was taken locally. */
  readonly fallback: boolean
}

interface RateLimitEntry {
  readonly limit: CompiledLimit
  readonly spec: NonNullable<CompiledLimit['rate']>
  /** Shared (Redis) rate and this replica's share of it. */
  readonly shared: Rate
  readonly local: Rate
  readonly policy: string
  /** This replica's buckets of the limit. */
  readonly table: RateTable
}

interface SlotLimitEntry {
  readonly table: SlotTable
  /** Slots per key on this replica. */
  readonly max: number
}

const NONE: LimitVerdict = {
  refused: undefined,
  reason: undefined,
  headers: {},
  release: undefined,
  fallback: false,
}

/**
 * The limits of one policy set, compiled for one runtime; state (bucket tables, in-flight counts,
 * the Redis connection) lives in LimitState and outlives reloads. Local decisions are synchronous:
 * no promise, no allocation beyond the check list, on the path of every limited request.
 */
export class Limiter {
  private readonly byServer = new Map<string, readonly CompiledLimit[]>()
  private readonly rates = new Map<CompiledLimit, RateLimitEntry>()
  private readonly slots = new Map<CompiledLimit, SlotLimitEntry>()
  /** Buckets each limit's table may hold, here and in Redis. */
  private readonly capacity: number

  constructor(
    readonly limits: readonly CompiledLimit[],
    private readonly state: LimitState,
    /** Replicas the deployment runs (`rateLimits.replicas`): local limits hold this share. */
    private readonly replicas: number,
  ) {
    this.capacity = state.capacityFor(limits.length)
    for (const l of limits) {
      if (l.concurrency !== undefined) {
        // Concurrency is held per replica; several replicas split it (docs/rate-limits.md).
        const max = Math.max(1, Math.floor(l.concurrency / replicas))
        this.slots.set(l, { table: state.slotTable(l.id, this.capacity), max })
      }
      if (l.rate === undefined) continue
      const { count, periodMs, burst } = l.rate
      this.rates.set(l, {
        limit: l,
        spec: l.rate,
        shared: rateOf(count, periodMs, burst),
        local: rateOf(count, periodMs, burst, replicas),
        policy: policyItem(l.name, l.rate),
        table: state.rateTable(l.id, this.capacity),
      })
    }
    state.retain(new Set(limits.map((l) => l.id)))
  }

  /** The limits naming `server` (computed once per server). */
  forServer(server: string): readonly CompiledLimit[] {
    let list = this.byServer.get(server)
    if (list === undefined) {
      list = this.limits.filter((l) => l.servers(server))
      this.byServer.set(server, list)
    }
    return list
  }

  decide(req: LimitRequest): LimitVerdict | Promise<LimitVerdict> {
    const candidates = this.forServer(req.server)
    if (candidates.length === 0) return NONE
    const rates: RateLimitEntry[] = []
    const keys: string[] = []
    const releases: (() => void)[] = []
    for (const l of candidates) {
      if (!limitApplies(l, req.caller, req.method, req.targets)) continue
      // SECURITY: a digest of fixed size, whatever the value's length (limits/key.ts).
      const key = bucketKey(req.keyValue(l.key))
      const slots = this.slots.get(l)
      if (slots !== undefined) {
        const release = slots.table.acquire(key, slots.max)
        if (typeof release !== 'function') {
          for (const r of releases) r()
          const reason = release === 'table_full' ? 'rate_limit_table_full' : 'rate_limited'
          return refusedBy(l, reason, 1000, {}, false)
        }
        releases.push(release)
      } else {
        rates.push(this.rates.get(l) as RateLimitEntry)
        keys.push(key)
      }
    }
    const release = releases.length === 0 ? undefined : once(releases)
    if (rates.length === 0) return release === undefined ? NONE : { ...NONE, release }
    const redis = this.state.redis
    if (redis === undefined || !redis.available)
      return this.conclude(rates, this.local(rates, keys), release, redis !== undefined)
    return redis
      .decide(
        rates.map((r, i) => ({
          table: r.limit.id,
          key: keys[i] as string,
          rate: r.shared,
          capacity: this.capacity,
        })),
      )
      .then((shared) =>
        shared === undefined
          ? this.conclude(rates, this.local(rates, keys), release, true)
          : this.conclude(rates, shared, release, false),
      )
  }

  private local(rates: readonly RateLimitEntry[], keys: readonly string[]): GcraResult[] {
    return decideLocal(
      rates.map((r, i) => ({ table: r.table, key: keys[i] as string, rate: r.local })),
      this.state.now(),
    )
  }

  private conclude(
    rates: readonly RateLimitEntry[],
    results: readonly GcraResult[],
    release: (() => void) | undefined,
    fallback: boolean,
  ): LimitVerdict {
    if (fallback) this.state.onFallback()
    let policy = ''
    let status = ''
    let refused: CompiledLimit | undefined
    let reason: LimitRefusal | undefined
    let retryMs = 0
    for (let i = 0; i < rates.length; i++) {
      const e = rates[i] as RateLimitEntry
      const r = results[i] as GcraResult
      policy += (i === 0 ? '' : ', ') + e.policy
      status += (i === 0 ? '' : ', ') + stateItem(e.limit, r)
      if (!r.allowed) {
        if (refused === undefined) {
          refused = e.limit
          reason = r.full ? 'rate_limit_table_full' : 'rate_limited'
        }
        retryMs = Math.max(retryMs, r.retryAfterMs)
      }
    }
    const headers = { 'ratelimit-policy': policy, ratelimit: status }
    if (refused === undefined || reason === undefined)
      return { refused: undefined, reason: undefined, headers, release, fallback }
    release?.()
    return refusedBy(refused, reason, retryMs, headers, fallback)
  }
}

function refusedBy(
  limit: CompiledLimit,
  reason: LimitRefusal,
  retryMs: number,
  headers: Readonly<Record<string, string>>,
  fallback: boolean,
): LimitVerdict {
  return {
    refused: limit,
    reason,
    headers: { ...headers, 'retry-after': retryAfterSeconds(retryMs) },
    release: undefined,
    fallback,
  }
}

function once(releases: readonly (() => void)[]): () => void {
  return () => {
    for (const r of releases) r()
  }
}
