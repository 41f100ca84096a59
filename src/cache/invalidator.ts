import { Agent } from 'undici'
import type { EdgeCache } from './edge-cache.js'
import { tagOf } from './request.js'
import { ServerWatch, type InvalidatorOptions, type WatchedServer } from './server-watch.js'

/**
 * Keeps one upstream `subscriptions/listen` per fronted server whose backend advertises change
 * notifications, and drops the cache entries each notification makes stale (caching.mdx
 * §Invalidation). While a stream is down, entries of that server are served only within their ttl
 * (capped by cache.maxTtlMs); after a reconnect everything the stream covers is dropped, since
 * notifications sent in the gap are lost (there is no resumption in 2026-07-28).
 */
export class Invalidator {
  private readonly agent = new Agent({ connect: { timeout: 5000 }, keepAliveTimeout: 4000 })
  private readonly watches = new Map<string, ServerWatch>()

  constructor(
    private readonly cache: EdgeCache,
    private readonly opts: InvalidatorOptions,
  ) {
    cache.onStore = (entry) => {
      if (entry.method !== 'resources/read' || entry.uri === undefined) return
      for (const w of this.watches.values()) if (w.tag === entry.server) w.watchUri(entry.uri)
    }
  }

  /** Starts watches for new or changed servers and stops those of removed ones (start, reload). */
  sync(servers: Iterable<WatchedServer>): void {
    const wanted = new Map<string, WatchedServer>()
    for (const s of servers) wanted.set(`${tagOf(s)}\n${s.upstreamHeaders.join('\n')}`, s)
    for (const [id, watch] of this.watches) {
      if (wanted.has(id)) continue
      watch.stop()
      this.watches.delete(id)
    }
    for (const [id, server] of wanted) {
      if (this.watches.has(id)) continue
      const watch = new ServerWatch(server, this.cache, this.agent, this.opts)
      this.watches.set(id, watch)
      watch.start()
    }
  }

  /** Whether a listen stream of the named server is acknowledged and open. */
  isConnected(serverName: string): boolean {
    for (const w of this.watches.values()) if (w.name === serverName && w.connected) return true
    return false
  }

  /** Closes every stream and connection. */
  async stop(): Promise<void> {
    for (const w of this.watches.values()) w.stop()
    this.watches.clear()
    this.cache.onStore = undefined
    await this.agent.destroy()
  }
}
