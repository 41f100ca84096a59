import type { Principal } from '../auth/principal.js'
import type { CacheRequest, EdgeCache } from '../cache/edge-cache.js'
import { requestKeyOf, tagOf, type CachedServer } from '../cache/request.js'
import type { McpRequestInfo } from '../mcp/classify.js'

/** Merged-cache instances of this process; each has its own key namespace. */
let instances = 0

/** What a merged answer is looked up and stored under, fixed when the request starts. */
export interface MergedRequest {
  readonly req: CacheRequest
  readonly rawId: string
  /** The edge cache's generation of this namespace when the request started (stores after a drop are refused). */
  readonly generation: number
}

/** The parts of a virtual request a merged answer is keyed on. */
export interface MergedRequestOf {
  readonly mcp: McpRequestInfo
  /** The judged body text: the members are asked with it, so the key reads it (canonical.ts). */
  readonly text: string
  readonly principal: Principal | undefined
  /** The members the answer is merged from. */
  readonly members: readonly CachedServer[]
}

/**
 * Merged answers of one virtual server (docs/virtual-servers.md §Cache): a use of the edge cache,
 * not a store of its own. Each answer is an entry of the one in-memory tier, bounded by the same
 * `cache.maxBytes` and `cache.maxEntryBytes`, counted in the same metrics, and keyed by the one
 * canonical request key (cache/request.ts requestKeyOf: protocol version, every param, cursor
 * included, the client's capabilities, and for a private answer the caller's authorization
 * context), plus every member's policy view, which a merged answer is filtered by before it is
 * stored. Only complete answers with usable hints are kept (the edge cache's own rules); a hit
 * carries the ttl left. Kept in this process only: a merged page holds cursors sealed with this
 * gateway's key and names from this process's name table.
 */
export class MergedCache {
  // SECURITY: `#` is in no server name (config/schema.ts), so a merged answer's key never meets a
  // server's: one is never served as the other.
  private readonly tag = `virtual#${++instances}`
  /** The process's edge cache, as the first request handed it in (there is one per process). */
  private store: EdgeCache | undefined
  /** The members' tags this namespace was registered as built from (EdgeCache.buildsOn). */
  private sources: string | undefined

  /**
   * `maxTtlMs`: merged answers are fresh no longer than this (cache.maxTtlMs); `name`: the
   * virtual server's, for the metrics.
   */
  constructor(
    private readonly maxTtlMs: number,
    private readonly name?: string,
  ) {}

  /**
   * The key of a merged answer to `r` as filtered by `views` (each member's list-filter key, in
   * member order); undefined when the request is not one the cache may answer.
   */
  request(
    cache: EdgeCache,
    r: MergedRequestOf,
    views: readonly string[],
  ): MergedRequest | undefined {
    this.store = cache
    // A member's change notification (the edge cache's listen on it) drops these answers too.
    const sources = r.members.map(tagOf)
    const joined = sources.join('\n')
    if (this.sources !== joined) {
      cache.buildsOn(this.tag, sources)
      this.sources = joined
    }
    const scope = { server: this.tag, name: this.name, view: JSON.stringify(views) }
    const resolved = requestKeyOf(scope, r.mcp, r.text, r.principal, cache.rules.allowPrivate)
    if (resolved === undefined) return undefined
    return { ...resolved, generation: cache.generation(this.tag) }
  }

  /** The stored answer as JSON-RPC response text with the requester's id, or undefined. */
  get(cache: EdgeCache, m: MergedRequest): string | undefined {
    const slot = cache.lookup(m.req)
    if (slot === undefined) return undefined
    const hit = cache.render(slot, m.rawId, m.req.method, undefined)
    return Buffer.concat([hit.head, hit.body, hit.tail], hit.length).toString('utf8')
  }

  /** Keeps a complete merged answer, unless a member's change dropped this namespace meanwhile. */
  set(cache: EdgeCache, m: MergedRequest, result: Readonly<Record<string, unknown>>): void {
    const ttlMs = result.ttlMs
    const capped =
      typeof ttlMs === 'number' && ttlMs > this.maxTtlMs
        ? { ...result, ttlMs: this.maxTtlMs }
        : result
    cache.keep(m.req, capped, m.generation)
  }

  /** Drops every merged answer (a member's list changed); one being built meanwhile is not kept. */
  clear(): void {
    this.store?.invalidate(this.tag, { kind: 'all' }, false)
  }
}
