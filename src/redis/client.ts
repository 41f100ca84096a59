import { createRequire } from 'node:module'
import type * as IORedis from 'ioredis'

const require = createRequire(import.meta.url)

/** How long each connection's setup commands (ioredis's INFO ready check) may take. */
const SETUP_TIMEOUT_MS = 2000

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
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: SETUP_TIMEOUT_MS,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5000),
  })
  // ioredis sends its ready check under `commandTimeout`: with the short timeout of requests, a
  // Redis that takes longer than that to answer a new connection's first command (a cold start,
  // a far region, a TLS proxy) would time out the check on every reconnect and never be used.
  // The short timeout applies from `ready`, when our commands start; each new connection's
  // setup gets the long one again. ioredis reads `options.commandTimeout` per command.
  client.on('ready', () => void (client.options.commandTimeout = commandTimeoutMs))
  client.on('close', () => void (client.options.commandTimeout = SETUP_TIMEOUT_MS))
  return client
}
