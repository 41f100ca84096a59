import { createRequire } from 'node:module'
import type * as IORedis from 'ioredis'

const require = createRequire(import.meta.url)

/**
 * A Redis connection that is never on the critical path (docs/cache.md §Shared tier,
 * docs/rate-limits.md §Redis): no offline queue, no per-request retries, a short command timeout,
 * and reconnects forever with capped backoff that no request waits for.
 *
 * ioredis is loaded here, the first time a config names a Redis, not when the gateway starts: it
 * holds about 2 MB of heap that a gateway without Redis would carry for nothing
 * (docs/design/hot-path.md §Memory at rest).
 */
export function connectRedis(url: string, commandTimeoutMs: number): IORedis.Redis {
  const { Redis } = require('ioredis') as typeof IORedis
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5000),
  })
}
