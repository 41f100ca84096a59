import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { SharedTier, SharedValue } from './shared.js'

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
}

/**
 * Redis as the shared tier (ioredis). Same keys as the memory tier under a prefix, expiry by PX.
 * SECURITY/availability: Redis is never on the critical path: no offline queue, no per-request
 * retries, a short command timeout. When it is down, requests go on memory-only and one log line
 * says so; another says when it is back.
 */
export class RedisTier implements SharedTier {
  private readonly client: Redis
  private readonly prefix: string
  private degraded = false

  constructor(private readonly opts: RedisTierOptions) {
    this.prefix = opts.prefix ?? 'mcp-edge:c1:'
    this.client = new Redis(opts.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: opts.commandTimeoutMs ?? 250,
      connectTimeout: 2000,
      // Reconnect forever with capped backoff; requests never wait for it.
      retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5000),
    })
    this.client.on('error', (err: Error) => this.degrade(err))
    this.client.on('ready', () => {
      if (this.degraded) this.opts.log.info('cache: redis is back; shared tier active again')
      else this.opts.log.debug('cache: redis connected')
      this.degraded = false
    })
  }

  async get(key: string): Promise<SharedValue | undefined> {
    if (this.client.status !== 'ready') return undefined
    try {
      const k = this.prefix + key
      const res = await this.client.pipeline().getBuffer(k).pttl(k).exec()
      const value = res?.[0]?.[1]
      const pttl = res?.[1]?.[1]
      if (!Buffer.isBuffer(value) || typeof pttl !== 'number') return undefined
      // SECURITY: bounded on the way in too, whoever wrote it.
      if (value.length > this.opts.maxValueBytes) return undefined
      return { value, pttl }
    } catch (err) {
      this.degrade(err)
      return undefined
    }
  }

  set(key: string, value: Buffer, pxMs: number): void {
    if (this.client.status !== 'ready' || value.length > this.opts.maxValueBytes || pxMs <= 0)
      return
    this.client
      .set(this.prefix + key, value, 'PX', Math.ceil(pxMs))
      .catch((err: unknown) => this.degrade(err))
  }

  delete(key: string): void {
    if (this.client.status !== 'ready') return
    this.client.unlink(this.prefix + key).catch((err: unknown) => this.degrade(err))
  }

  async dropPrefixes(prefixes: readonly string[]): Promise<void> {
    if (this.client.status !== 'ready') return
    try {
      for (const p of prefixes) await this.dropMatching(`${escapeGlob(this.prefix + p)}*`)
    } catch (err) {
      this.degrade(err)
    }
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

  async close(): Promise<void> {
    this.client.disconnect()
  }

  private degrade(err: unknown): void {
    if (this.degraded) return
    this.degraded = true
    this.opts.log.warn({ err: String(err) }, 'cache: redis unavailable; serving from memory only')
  }
}

/** Redis glob patterns treat these as special; keys are matched literally. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)
}
