import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { Logger } from 'pino'
import type { CacheConfig } from '../config/schema.js'
import { filterMessage, type ListFilter } from '../mcp/list-filter.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import {
  createEntry,
  parseResult,
  hitParts,
  type HitParts,
  resultBytes,
  type CacheEntry,
} from './entry.js'
import type { Invalidation } from '../mcp/changes.js'
import { invalidationPrefixes } from './key.js'
import {
  decideStore,
  uncacheableReason,
  type StoreDecision,
  type StoreRules,
  type UncacheableReason,
} from './policy.js'
import { readShared, type SharedTier, type SharedTierStatus } from './shared.js'
import { encodeEntry } from './shared-entry.js'
import { SingleFlight, type Leader, type Waiter } from './single-flight.js'
import { isFresh, MemoryTier, type Clock, type Slot } from './store.js'

/** How long a key whose answer had no usable hints bypasses the cache. */
const PASS_MS = 30_000

/** One cacheable request, resolved once by the cache stage (pipeline/edge-cache.ts). */
export interface CacheRequest {
  /** Server tag (key.ts serverTag). */
  readonly server: string
  /** The server or virtual server's name, for the metrics; undefined: not counted. */
  readonly name?: string | undefined
  readonly method: string
  readonly uri: string | undefined
  readonly publicKey: string
  /** Set when per-caller caching is on and the caller has an authorization context. */
  readonly privateKey: string | undefined
}

/** Closed set of cache event labels: bounded label values keep the metric's series few. */
export type CacheEvent =
  | 'hit'
  | 'miss'
  | 'store'
  | 'evict'
  | 'expire'
  | 'invalidate'
  | 'stale'
  | 'shared_hit'
  | 'shared_rejected'
  | 'shared_error'
  | 'shared_bypass'
  | 'coalesced'
  | 'wait_timeout'
  | 'pass'

/** A key that bypasses the cache for a while (hit-for-pass): until when, and why. */
interface Pass {
  readonly until: number
  readonly why: UncacheableReason
}

/** Collaborators; all optional except config. */
export interface EdgeCacheDeps {
  readonly now?: Clock
  readonly shared?: SharedTier
  readonly metrics?: Pick<GatewayMetrics, 'cacheEvents' | 'cacheBytes'> &
    Partial<Pick<GatewayMetrics, 'cacheUncacheable'>>
  readonly log?: Pick<Logger, 'warn'>
}

/**
 * The edge cache: an in-memory LRU in front of an optional shared tier, single flight per key,
 * per-server generations so an answer fetched before an invalidation is never stored after it,
 * and memoised policy-filtered variants of entries.
 */
export class EdgeCache {
  readonly now: Clock
  readonly rules: StoreRules
  readonly staleIfErrorMs: number
  /** Told about every stored entry (the invalidator subscribes to cached resource URIs). */
  onStore: ((entry: CacheEntry) => void) | undefined = undefined
  private readonly memory: MemoryTier
  private readonly shared: SharedTier | undefined
  private readonly flights = new SingleFlight<CacheEntry>()
  private readonly generations = new Map<string, number>()
  /** Public keys whose last answer was private: later misses coalesce per caller instead. */
  private readonly privateHints = new LRUCache<string, true>({ max: 10_000 })
  /**
   * Public keys whose last answer had no usable hints: until when they bypass the cache, and why
   * that answer was not kept (each bypassed answer is counted under it).
   */
  private readonly passes = new LRUCache<string, Pass>({ max: 10_000 })
  /**
   * Tags whose entries are built from other servers' answers (virtual servers' merged answers),
   * with the tags of those servers. Bounded: a reload makes new tags, and the oldest are unused.
   */
  private readonly builtFrom = new LRUCache<string, readonly string[]>({ max: 4096 })

  constructor(
    config: CacheConfig,
    private readonly deps: EdgeCacheDeps = {},
  ) {
    this.now = deps.now ?? Date.now
    this.rules = { allowPrivate: config.private, maxTtlMs: config.maxTtlMs }
    this.staleIfErrorMs = config.staleIfErrorMs
    this.shared = deps.shared
    this.memory = new MemoryTier({
      maxBytes: config.maxBytes,
      maxEntryBytes: config.maxEntryBytes,
      staleMs: config.staleIfErrorMs,
      now: this.now,
      onDrop: (reason) => this.event(reason),
    })
  }

  /** A fresh in-memory entry for the request (public first, then the caller's private one). */
  lookup(req: CacheRequest): Slot | undefined {
    const slot = this.memory.getFresh(req.publicKey)
    if (slot !== undefined || req.privateKey === undefined) return slot
    return this.memory.getFresh(req.privateKey)
  }

  /** A fresh entry from the shared tier, copied into memory. */
  async lookupShared(req: CacheRequest): Promise<Slot | undefined> {
    const entry = await this.fromShared(req, (e, now) => isFresh(e, now))
    if (entry === undefined) return undefined
    this.memory.setEntry(entry)
    this.event('shared_hit')
    return { entry, bytes: entry.result }
  }

  /** An entry past its freshness but within cache.staleIfErrorMs, for a failed upstream. */
  async stale(req: CacheRequest): Promise<Slot | undefined> {
    if (this.staleIfErrorMs <= 0) return undefined
    const inWindow = (e: CacheEntry, t: number): boolean =>
      t - e.storedAt < e.lifeMs + this.staleIfErrorMs
    const now = this.now()
    for (const key of keysOf(req)) {
      const slot = this.memory.get(key)
      if (slot !== undefined && inWindow(slot.entry, now)) return slot
    }
    const entry = await this.fromShared(req, inWindow)
    return entry === undefined ? undefined : { entry, bytes: entry.result }
  }

  private async fromShared(
    req: CacheRequest,
    usable: (e: CacheEntry, now: number) => boolean,
  ): Promise<CacheEntry | undefined> {
    const shared = this.shared
    if (shared === undefined) return undefined
    return readShared(shared, req, {
      now: this.now,
      maxTtlMs: this.rules.maxTtlMs,
      usable,
      // SECURITY: a value that fails its checks is neither served nor copied to memory, and is
      // deleted so that the next answer from the backend takes its place.
      onReject: (key, why) => {
        this.event('shared_rejected')
        shared.delete(key)
        this.deps.log?.warn({ key, why }, 'cache: dropped an invalid shared entry')
      },
    })
  }

  /** Joins or leads the single flight for this request's likely key. */
  begin(req: CacheRequest): Leader<CacheEntry> | Waiter<CacheEntry> {
    const key =
      req.privateKey !== undefined && this.privateHints.has(req.publicKey)
        ? req.privateKey
        : req.publicKey
    return this.flights.begin(key)
  }

  /** Whether a flight's entry may answer this request (private entries only their own context). */
  usableFor(entry: CacheEntry, req: CacheRequest): boolean {
    // SECURITY: a waiter of another authorization context never takes a private answer.
    return (
      entry.key === req.publicKey || (req.privateKey !== undefined && entry.key === req.privateKey)
    )
  }

  /** The invalidation generation of a server; captured when a miss starts. */
  generation(server: string): number {
    return this.generations.get(server) ?? 0
  }

  /**
   * Stores an upstream's final response when policy allows. Returns the entry (even one too big
   * to keep, so single-flight waiters can still be answered from it) or undefined.
   */
  capture(
    req: CacheRequest,
    message: Readonly<Record<string, unknown>>,
    generation: number,
  ): CacheEntry | undefined {
    const decision = decideStore(message, this.rules, req.privateKey !== undefined)
    if (decision === undefined) {
      const why = uncacheableReason(message)
      this.uncacheable(req, why)
      this.notePass(req, message, why)
      return undefined
    }
    const kept = this.store(req, message, decision, generation, true)
    if (kept?.stored === false) this.uncacheable(req, 'too_large')
    return kept?.entry
  }

  /**
   * Stores a result the gateway built itself (a virtual server's merged list) under the same
   * rules, bounds and accounting as a backend's answer (docs/cache.md §Merged answers), in this
   * process only: its cursors are sealed with this gateway's key and its names come from this
   * process's name table. True when it was kept.
   */
  keep(req: CacheRequest, result: Readonly<Record<string, unknown>>, generation: number): boolean {
    const message = { result }
    const decision = decideStore(message, this.rules, req.privateKey !== undefined)
    if (decision === undefined) {
      this.uncacheable(req, uncacheableReason(message))
      return false
    }
    const kept = this.store(req, message, decision, generation, false)
    if (kept?.stored === false) this.uncacheable(req, 'too_large')
    return kept?.stored === true
  }

  private store(
    req: CacheRequest,
    message: Readonly<Record<string, unknown>>,
    decision: StoreDecision,
    generation: number,
    shared: boolean,
  ): { readonly entry: CacheEntry; readonly stored: boolean } | undefined {
    const key = decision.scope === 'public' ? req.publicKey : req.privateKey
    if (key === undefined) return undefined
    const now = this.now()
    const entry = createEntry(message, decision, {
      key,
      server: req.server,
      method: req.method,
      uri: req.uri,
      storedAt: now,
    })
    // An invalidation arrived while this answer was in flight: it may predate the change.
    if (this.generation(req.server) !== generation) return undefined
    if (decision.scope === 'private') this.privateHints.set(req.publicKey, true)
    // SECURITY/availability: every layer's entries live in the one byte-bounded tier (maxBytes,
    // maxEntryBytes), whoever built them.
    if (!this.memory.setEntry(entry)) return { entry, stored: false }
    this.event('store')
    if (shared) {
      const px = entry.lifeMs + this.staleIfErrorMs
      this.shared?.set(key, encodeEntry(entry, px), px)
    }
    this.onStore?.(entry)
    return { entry, stored: true }
  }

  /**
   * Whether this request should bypass the cache: its key recently answered without usable hints
   * (Varnish's hit-for-pass). Reading an answer whole to decide costs a 20 KB list about as much
   * as forwarding it, so uncacheable lists are streamed untouched for a while.
   */
  isPass(req: CacheRequest): boolean {
    const pass = this.passes.get(req.publicKey)
    if (pass === undefined) return false
    if (this.now() < pass.until) {
      this.uncacheable(req, pass.why)
      return true
    }
    this.passes.delete(req.publicKey)
    return false
  }

  /**
   * The answer to this request cannot be kept: too large to hold (past `maxEntryBytes`, so the
   * capture stopped reading it) or not readable. It is relayed untouched, and the key passes like
   * one without usable hints, so the next callers neither wait on a flight that cannot answer
   * them nor pay for a capture.
   */
  cannotKeep(req: CacheRequest): void {
    this.uncacheable(req, 'too_large')
    this.startPass(req, 'too_large')
  }

  private notePass(
    req: CacheRequest,
    message: Readonly<Record<string, unknown>>,
    why: UncacheableReason,
  ): void {
    // Errors are transient, and a private answer may still be kept for other callers' contexts.
    const result = message.result
    if ('error' in message || typeof result !== 'object' || result === null) return
    if (this.rules.allowPrivate && (result as Record<string, unknown>).cacheScope === 'private')
      return
    this.startPass(req, why)
  }

  private startPass(req: CacheRequest, why: UncacheableReason): void {
    const until = this.now() + Math.min(PASS_MS, this.rules.maxTtlMs)
    this.passes.set(req.publicKey, { until, why })
  }

  /**
   * Counts an answer to a cacheable request that is not kept, by server, method and why: the
   * status page shows these apart from misses, which the cache could have answered. Only on this
   * path (an answer that is not kept); a hit or a stored miss counts nothing here.
   */
  private uncacheable(req: CacheRequest, why: UncacheableReason): void {
    if (req.name === undefined) return
    this.deps.metrics?.cacheUncacheable?.inc({ server: req.name, method: req.method, reason: why })
  }

  /**
   * The response bytes for one requester. With a policy filter, the filtered result is built once
   * per (entry, filter.key) and kept as a variant (list-filter.ts: equal keys filter identically).
   */
  render(slot: Slot, rawId: string, method: string, filter: ListFilter | undefined): HitParts {
    const now = this.now()
    if (filter === undefined) return hitParts(slot.entry, rawId, now, slot.bytes)
    const entry = slot.entry
    // identityDependent decides the answer's scope, so it is part of what the variant depends on.
    const fkey = `${filter.identityDependent ? 'i' : 'o'}:${filter.key}`
    const vkey = `${entry.key}|f:${fkey.length <= 64 ? fkey : digest(fkey)}`
    let variant = this.memory.get(vkey)
    if (variant === undefined || variant.entry !== entry) {
      const message = filterMessage(filter, method, {
        jsonrpc: '2.0',
        id: 0,
        result: parseResult(entry),
      })
      const bytes =
        message === undefined
          ? entry.result
          : resultBytes(message.result as Record<string, unknown>)
      variant = { entry, bytes }
      this.memory.setVariant(vkey, entry, bytes)
    }
    return hitParts(entry, rawId, now, variant.bytes)
  }

  /**
   * Entries under `tag` are built from the answers of the servers tagged `sources` (a virtual
   * server's merged answers, from its members'): what a change drops of theirs, it drops of these.
   */
  buildsOn(tag: string, sources: readonly string[]): void {
    this.builtFrom.set(tag, sources)
  }

  /**
   * Drops what a change notification makes stale, here and in the shared tier (`shared: false`
   * for entries only this process holds, a virtual server's merged answers), and the same of
   * entries built from this server's answers.
   */
  invalidate(server: string, what: Invalidation, shared = true): number {
    this.generations.set(server, this.generation(server) + 1)
    const prefixes = invalidationPrefixes(server, what)
    let dropped = this.memory.dropPrefixes(prefixes)
    if (shared) void this.shared?.dropPrefixes(prefixes)
    for (const [tag, sources] of this.builtFrom.entries()) {
      if (tag === server || !sources.includes(server)) continue
      const on = invalidationPrefixes(tag, what)
      this.generations.set(tag, this.generation(tag) + 1)
      dropped += this.memory.dropPrefixes(on)
    }
    if (dropped > 0) this.deps.metrics?.cacheEvents.inc({ event: 'invalidate' }, dropped)
    this.deps.metrics?.cacheBytes.set(this.memory.bytes)
    return dropped
  }

  /** Counts an event and refreshes the bytes gauge. */
  event(name: CacheEvent): void {
    this.deps.metrics?.cacheEvents.inc({ event: name })
    if (name === 'store' || name === 'evict' || name === 'expire')
      this.deps.metrics?.cacheBytes.set(this.memory.bytes)
  }

  /** Bytes and entries held in memory (for tests and metrics). */
  get stats(): {
    readonly bytes: number
    readonly entries: number
    readonly flights: number
    readonly waiters: number
  } {
    return {
      bytes: this.memory.bytes,
      entries: this.memory.size,
      flights: this.flights.size,
      waiters: this.flights.waiters,
    }
  }

  /**
   * Whether the shared tier is in use (docs/cache.md §Shared tier), for readiness and status
   * pages; undefined without `cache.redis`.
   */
  sharedTier(): SharedTierStatus | undefined {
    return this.shared?.status()
  }

  /**
   * Connects the shared tier; resolves once its first attempt settled (connected, refused or
   * timed out), never rejects: a gateway starts memory-only rather than not at all.
   */
  async connect(): Promise<void> {
    await this.shared?.connect()
  }

  async close(): Promise<void> {
    this.memory.clear()
    await this.shared?.close()
  }
}

function keysOf(req: CacheRequest): string[] {
  return req.privateKey === undefined ? [req.publicKey] : [req.publicKey, req.privateKey]
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url')
}
