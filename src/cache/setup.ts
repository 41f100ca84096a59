import { isDeepStrictEqual } from 'node:util'
import type { Logger } from 'pino'
import type { CacheConfig } from '../config/schema.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import { EdgeCache } from './edge-cache.js'
import { Invalidator } from './invalidator.js'
import type { InvalidatorOptions, WatchedServer } from './server-watch.js'
import { RedisTier, type RedisTierOptions } from './redis.js'
import type { Clock } from './store.js'

/** The cache of a running gateway: the store and the listen streams that keep it honest. */
export interface GatewayCache {
  readonly cache: EdgeCache
  readonly invalidator: Invalidator
  /** Follows the fronted servers (start and reload); a changed `cache:` section needs a restart. */
  sync(servers: Iterable<WatchedServer>, config: CacheConfig | undefined): void
  /**
   * Waits (bounded, never failing) for the shared tier's first connection: awaited before the
   * listener opens, so a gateway that answers uses its Redis tier from its first request.
   */
  connect(): Promise<void>
  close(): Promise<void>
}

/** Test hooks: a clock, faster reconnects, a shorter Redis bypass. */
export interface CacheSetupOptions {
  readonly now?: Clock
  readonly invalidator?: Omit<InvalidatorOptions, 'log'>
  readonly redis?: Pick<RedisTierOptions, 'breaker' | 'commandTimeoutMs' | 'startWaitMs'>
}

/** Builds the cache from `cache:` config, or undefined when the section is absent. */
export function startCache(
  config: CacheConfig | undefined,
  deps: { readonly log: Logger; readonly metrics: GatewayMetrics },
  opts: CacheSetupOptions = {},
): GatewayCache | undefined {
  if (config === undefined) return undefined
  const shared =
    config.redis === undefined
      ? undefined
      : new RedisTier({
          ...opts.redis,
          url: config.redis,
          maxValueBytes: config.maxEntryBytes + 4096,
          log: deps.log,
          onEvent: (event) => deps.metrics.cacheEvents.inc({ event }),
        })
  const cache = new EdgeCache(config, {
    metrics: deps.metrics,
    log: deps.log,
    ...(shared !== undefined && { shared }),
    ...(opts.now !== undefined && { now: opts.now }),
  })
  const invalidator = new Invalidator(cache, { ...opts.invalidator, log: deps.log })
  deps.log.info(
    { maxBytes: config.maxBytes, private: config.private, redis: config.redis !== undefined },
    'cache: enabled',
  )
  return {
    cache,
    invalidator,
    connect: () => cache.connect(),
    sync(servers, next) {
      if (!isDeepStrictEqual(next, config)) {
        deps.log.warn('cache: the cache section changed; it takes effect after a restart')
      }
      invalidator.sync(servers)
    },
    async close() {
      await invalidator.stop()
      await cache.close()
    },
  }
}
