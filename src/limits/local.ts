import { gcra, type GcraResult, type Rate } from './gcra.js'

/** Milliseconds; injected in tests. */
export type Clock = () => number

/**
 * What one bucket costs in memory: a 43-character digest key (limits/key.ts), its Map entry and
 * the number it holds (about 116 bytes measured in V8), rounded up.
 */
export const BUCKET_BYTES = 128

/**
 * A full table is searched for idle buckets at most this often: under a flood of new keys every
 * request would otherwise walk the whole table. Between two searches a new key may be refused
 * although a bucket went idle meanwhile; no bucket that is not idle is ever dropped.
 */
const SWEEP_EVERY_MS = 1000

/** One rate check of a request: the limit's table, the bucket in it, and the rate that applies. */
export interface LocalCheck {
  readonly table: RateTable
  /** A fixed-size digest of the key value (limits/key.ts). */
  readonly key: string
  readonly rate: Rate
}

/**
 * The GCRA buckets of one limit on one replica: one TAT per key, at most `capacity` of them.
 * SECURITY: a bucket that is not idle (its TAT still ahead: a fresh one would allow more) is never
 * dropped to make room, since forgetting it hands its caller a fresh burst; when the table is full
 * of such buckets, a new key is refused instead (docs/rate-limits.md §Memory). An idle bucket
 * (TAT past) is what an absent one means anyway: those are dropped when room is needed. Each limit
 * has its own table, so the keys of one (a header a client chooses) never push out another's.
 */
export class RateTable {
  private readonly tats = new Map<string, number>()
  /** No bucket becomes idle before this (a lower bound: TATs only move forward while stored). */
  private earliestIdle = Infinity
  /** No search for idle buckets before this. */
  private nextSweep = -Infinity

  constructor(
    /** Most buckets held; set again when a reload changes how many limits share the memory. */
    public capacity: number,
  ) {}

  /** The TAT of `key`, or undefined for a key without a bucket. */
  get(key: string): number | undefined {
    return this.tats.get(key)
  }

  /** True when `key` has a bucket, or one can be made for it now. */
  admits(key: string, now: number): boolean {
    if (this.tats.size < this.capacity || this.tats.has(key)) return true
    if (now < this.earliestIdle || now < this.nextSweep) return false
    this.sweep(now)
    return this.tats.size < this.capacity
  }

  set(key: string, tat: number): void {
    this.tats.set(key, tat)
    if (tat < this.earliestIdle) this.earliestIdle = tat
  }

  /** ms until a refused new key may find room (a bucket idle and a search allowed). */
  retryAfterMs(now: number): number {
    return Math.max(this.earliestIdle, this.nextSweep) - now
  }

  /** Buckets held, idle ones included until room is needed. */
  get size(): number {
    return this.tats.size
  }

  /** True when no bucket differs from a fresh one: dropping the table changes nothing. */
  idle(now: number): boolean {
    this.sweep(now)
    return this.tats.size === 0
  }

  /** Drops every idle bucket and learns when the next one goes idle. */
  private sweep(now: number): void {
    let earliest = Infinity
    for (const [key, tat] of this.tats) {
      if (tat <= now) this.tats.delete(key)
      else if (tat < earliest) earliest = tat
    }
    this.earliestIdle = earliest
    this.nextSweep = now + SWEEP_EVERY_MS
  }
}

/** A GCRA result refusing a key its table has no room for. */
function tableFull(table: RateTable, now: number): GcraResult {
  const wait = table.retryAfterMs(now)
  return { allowed: false, full: true, tat: now, remaining: 0, retryAfterMs: wait, resetMs: wait }
}

/**
 * Decides the rate checks of one request locally. All pass or none is counted (several limits on
 * one request are all-or-nothing), a key refused for want of room included.
 */
export function decideLocal(checks: readonly LocalCheck[], now: number): GcraResult[] {
  const results: GcraResult[] = []
  let allowed = true
  for (const c of checks) {
    const r = c.table.admits(c.key, now)
      ? gcra(c.rate, c.table.get(c.key), now)
      : tableFull(c.table, now)
    results.push(r)
    if (!r.allowed) allowed = false
  }
  if (allowed) {
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i] as LocalCheck
      c.table.set(c.key, (results[i] as GcraResult).tat)
    }
  }
  return results
}

/** Why {@link SlotTable.acquire} gave no slot. */
export type NoSlot = 'at_limit' | 'table_full'

/**
 * In-flight requests per key of one concurrency limit on one replica. An entry exists only while a
 * request holds a slot, so every entry is in use: at `capacity` keys, a new key is refused
 * (SECURITY: as in RateTable, nobody's held slots are forgotten to make room). Each slot is given
 * back exactly once.
 */
export class SlotTable {
  private readonly inFlight = new Map<string, number>()

  constructor(public capacity: number) {}

  /** Takes a slot under `max`; why not, when the key is at `max` or the table is full. */
  acquire(key: string, max: number): (() => void) | NoSlot {
    const n = this.inFlight.get(key)
    if (n === undefined && this.inFlight.size >= this.capacity) return 'table_full'
    if ((n ?? 0) >= max) return 'at_limit'
    this.inFlight.set(key, (n ?? 0) + 1)
    let held = true
    return () => {
      if (!held) return
      held = false
      const left = (this.inFlight.get(key) ?? 1) - 1
      if (left <= 0) this.inFlight.delete(key)
      else this.inFlight.set(key, left)
    }
  }

  held(key: string): number {
    return this.inFlight.get(key) ?? 0
  }

  /** Keys holding slots. */
  get size(): number {
    return this.inFlight.size
  }
}
