import type { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { Logger } from 'pino'
import { Breaker, BREAKER_DEFAULTS } from '../redis/breaker.js'
import { connectRedis } from '../redis/client.js'

/**
 * Where sealed token records, connect flows and single-use marks live: the process's memory, or
 * Redis shared by every gateway replica (docs/auth.md §Per-user credentials). Values are opaque
 * to the store: every one is sealed before it gets here (userauth/seal.ts).
 */
export interface TokenStore {
  readonly kind: 'memory' | 'redis'
  get(name: string): Promise<string | undefined>
  set(name: string, value: string, ttlMs: number): Promise<void>
  delete(name: string): Promise<void>
  /** Sets `name` only when absent; true when this call set it (single-use links, refresh locks). */
  claim(name: string, ttlMs: number): Promise<boolean>
  /** Reads and deletes `name` in one step (a connect flow is used once). */
  take(name: string): Promise<string | undefined>
  /** Every entry whose name starts with `prefix` (listing connected users). */
  entries(prefix: string): Promise<{ readonly name: string; readonly value: string }[]>
  close(): Promise<void>
}

/** The store could not answer (Redis down or bypassed): requests fail closed, never elicit. */
export class StoreUnavailable extends Error {
  override readonly name = 'StoreUnavailable'
}

/** A bounded in-process store: tokens are lost when the process ends. */
export class MemoryStore implements TokenStore {
  readonly kind = 'memory'
  readonly #map: LRUCache<string, string>

  constructor(maxEntries: number) {
    // SECURITY: bounded: a caller who opens connect links without end cannot fill the memory.
    this.#map = new LRUCache({ max: maxEntries, ttlAutopurge: false })
  }

  get(name: string): Promise<string | undefined> {
    return Promise.resolve(this.#map.get(name))
  }
  set(name: string, value: string, ttlMs: number): Promise<void> {
    this.#map.set(name, value, { ttl: ttlMs })
    return Promise.resolve()
  }
  delete(name: string): Promise<void> {
    this.#map.delete(name)
    return Promise.resolve()
  }
  claim(name: string, ttlMs: number): Promise<boolean> {
    if (this.#map.has(name)) return Promise.resolve(false)
    this.#map.set(name, '1', { ttl: ttlMs })
    return Promise.resolve(true)
  }
  take(name: string): Promise<string | undefined> {
    const value = this.#map.get(name)
    this.#map.delete(name)
    return Promise.resolve(value)
  }
  entries(prefix: string): Promise<{ name: string; value: string }[]> {
    const out: { name: string; value: string }[] = []
    for (const [name, value] of this.#map.entries())
      if (name.startsWith(prefix)) out.push({ name, value })
    return Promise.resolve(out)
  }
  close(): Promise<void> {
    return Promise.resolve()
  }
}

/** How long one store command may take before the request is answered without it. */
const COMMAND_TIMEOUT_MS = 500
const PREFIX = 'mcp-edge:ut1:'

/**
 * Redis as the shared store, under the gateway's usual rules for Redis (redis/client.ts): no
 * offline queue, a short command timeout, and a circuit breaker, so a Redis that stops answering
 * costs each request at most one timeout, then none while the breaker is open. Unlike the cache,
 * a failure here is not carried on without: the request fails closed (StoreUnavailable).
 */
export class RedisStore implements TokenStore {
  readonly kind = 'redis'
  readonly #client: Redis
  readonly #breaker: Breaker

  constructor(
    readonly url: string,
    log: Logger | undefined,
    now: () => number = Date.now,
  ) {
    this.#client = connectRedis(url, COMMAND_TIMEOUT_MS)
    this.#breaker = new Breaker({ ...BREAKER_DEFAULTS, now })
    // Reported once per change by the breaker below; ioredis would otherwise print each retry.
    this.#client.on('error', (err: Error) =>
      log?.debug({ err: err.message }, 'userTokens: redis error'),
    )
  }

  get(name: string): Promise<string | undefined> {
    return this.#run(async (c) => (await c.get(PREFIX + name)) ?? undefined)
  }
  set(name: string, value: string, ttlMs: number): Promise<void> {
    return this.#run(async (c) => void (await c.set(PREFIX + name, value, 'PX', ttlMs)))
  }
  delete(name: string): Promise<void> {
    return this.#run(async (c) => void (await c.del(PREFIX + name)))
  }
  claim(name: string, ttlMs: number): Promise<boolean> {
    return this.#run(async (c) => (await c.set(PREFIX + name, '1', 'PX', ttlMs, 'NX')) === 'OK')
  }
  take(name: string): Promise<string | undefined> {
    return this.#run(async (c) => (await c.getdel(PREFIX + name)) ?? undefined)
  }
  async entries(prefix: string): Promise<{ name: string; value: string }[]> {
    const out: { name: string; value: string }[] = []
    let cursor = '0'
    do {
      const [next, keys] = await this.#run((c) =>
        c.scan(cursor, 'MATCH', `${PREFIX}${prefix}*`, 'COUNT', 500),
      )
      cursor = next
      if (keys.length === 0) continue
      const values = await this.#run((c) => c.mget(keys))
      keys.forEach((k, i) => {
        const v = values[i]
        if (typeof v === 'string') out.push({ name: k.slice(PREFIX.length), value: v })
      })
    } while (cursor !== '0')
    return out
  }
  async close(): Promise<void> {
    await this.#client.quit().catch(() => this.#client.disconnect())
  }

  /** Waits for the first connection (the CLI, which has nothing else to do meanwhile). */
  ready(timeoutMs: number): Promise<boolean> {
    if (this.#client.status === 'ready') return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs)
      this.#client.once('ready', () => {
        clearTimeout(timer)
        resolve(true)
      })
    })
  }

  async #run<T>(command: (c: Redis) => Promise<T>): Promise<T> {
    const pass = this.#breaker.allow()
    // SECURITY: fail closed: no answer from the store is never "no token" (which would prompt a
    // connected user to connect again) nor a token.
    if (pass === undefined) throw new StoreUnavailable('token store unavailable')
    try {
      // A connection still being made (a gateway just started) is waited for, briefly.
      if (this.#client.status !== 'ready' && !(await this.ready(COMMAND_TIMEOUT_MS)))
        throw new Error('redis not connected')
      const result = await command(this.#client)
      this.#breaker.succeeded()
      return result
    } catch (err) {
      this.#breaker.failedWith(pass === 'probe')
      throw new StoreUnavailable('token store unavailable', { cause: err })
    }
  }
}
