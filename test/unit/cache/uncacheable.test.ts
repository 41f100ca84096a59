import { describe, expect, it } from 'vitest'
import { keyParamsOf } from '../../../src/cache/canonical.js'
import { EdgeCache, type CacheRequest } from '../../../src/cache/edge-cache.js'
import { cacheKey, serverTag } from '../../../src/cache/key.js'
import { createMetrics } from '../../../src/observability/metrics.js'

/**
 * Answers the cache does not keep are counted by server, method and why
 * (`mcp_edge_cache_uncacheable_total`), so the status page can tell them from misses.
 */

const config = {
  maxBytes: 1 << 20,
  maxEntryBytes: 2048,
  maxTtlMs: 60_000,
  private: false,
  staleIfErrorMs: 0,
}

function setup() {
  const metrics = createMetrics(false)
  let now = 1_000
  const cache = new EdgeCache(config, { metrics, now: () => now })
  const counts = async (): Promise<Record<string, number>> => {
    const m = await metrics.cacheUncacheable.get()
    return Object.fromEntries(
      m.values.map((v) => [`${v.labels.server} ${v.labels.method} ${v.labels.reason}`, v.value]),
    )
  }
  return { cache, counts, later: (ms: number) => (now += ms) }
}

function request(method: string, name: string | null = 'docs'): CacheRequest {
  const parts = {
    server: serverTag('docs', ['http://127.0.0.1:1/mcp']),
    method,
    version: '2026-07-28',
    params: keyParamsOf('{"params":{}}'),
    uri: undefined,
  }
  return {
    server: parts.server,
    name: name ?? undefined,
    method,
    uri: undefined,
    publicKey: cacheKey(parts),
    privateKey: undefined,
  }
}

const result = (over: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id: 1,
  result: { tools: [], resultType: 'complete', ttlMs: 30_000, cacheScope: 'public', ...over },
})

describe('answers the cache does not keep', () => {
  it('are counted by why, and a kept one not at all', async () => {
    const { cache, counts } = setup()
    expect(cache.capture(request('tools/list'), result({}), 0)).toBeDefined()
    expect(cache.capture(request('prompts/list'), result({ ttlMs: 0 }), 0)).toBeUndefined()
    expect(
      cache.capture(request('resources/list'), result({ cacheScope: 'private' }), 0),
    ).toBeUndefined()
    expect(
      cache.capture(request('resources/templates/list'), result({ cacheScope: undefined }), 0),
    ).toBeUndefined()
    expect(
      cache.capture(
        request('server/discover'),
        { jsonrpc: '2.0', id: 1, error: { code: -1, message: 'x' } },
        0,
      ),
    ).toBeUndefined()
    expect(
      cache.capture(request('resources/read'), result({ resultType: 'input_required' }), 0),
    ).toBeUndefined()
    expect(await counts()).toEqual({
      'docs prompts/list no_ttl': 1,
      'docs resources/list private': 1,
      'docs resources/templates/list private': 1,
      'docs server/discover error': 1,
      'docs resources/read incomplete': 1,
    })
  })

  it('count each request that bypasses the cache under the reason of the answer that started it', async () => {
    const { cache, counts, later } = setup()
    const req = request('tools/list')
    cache.capture(req, result({ ttlMs: 0 }), 0)
    expect(cache.isPass(req)).toBe(true)
    expect(cache.isPass(req)).toBe(true)
    expect(await counts()).toEqual({ 'docs tools/list no_ttl': 3 })
    later(60_000) // the pass is over: the next answer is read again
    expect(cache.isPass(req)).toBe(false)
    expect(await counts()).toEqual({ 'docs tools/list no_ttl': 3 })
  })

  it('count answers too large to keep, and merged answers of a virtual server by its name', async () => {
    const { cache, counts } = setup()
    const big = {
      tools: [{ name: 'x'.repeat(4096) }],
      resultType: 'complete',
      ttlMs: 30_000,
      cacheScope: 'public',
    }
    cache.cannotKeep(request('tools/list'))
    expect(cache.keep(request('prompts/list', 'workspace'), big, 0)).toBe(false)
    expect(cache.keep(request('tools/list', 'workspace'), { ...big, tools: [], ttlMs: 0 }, 0)).toBe(
      false,
    )
    // A request nobody named (a test's or an internal one) is not counted.
    cache.capture(request('resources/list', null), result({ ttlMs: 0 }), 0)
    expect(await counts()).toEqual({
      'docs tools/list too_large': 1,
      'workspace prompts/list too_large': 1,
      'workspace tools/list no_ttl': 1,
    })
  })
})
