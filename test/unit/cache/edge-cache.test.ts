import { describe, expect, it } from 'vitest'
import { EdgeCache, type CacheRequest } from '../../../src/cache/edge-cache.js'
import type { HitParts } from '../../../src/cache/entry.js'
import { keyParamsOf } from '../../../src/cache/canonical.js'
import { cacheKey, serverTag, type AuthContext } from '../../../src/cache/key.js'
import type { ListFilter } from '../../../src/mcp/list-filter.js'

const config = {
  maxBytes: 1 << 20,
  maxEntryBytes: 1 << 18,
  maxTtlMs: 300_000,
  private: true,
  staleIfErrorMs: 0,
}
const server = serverTag('app', ['http://127.0.0.1:1/mcp'])
const parts = (method = 'tools/list', params: Record<string, unknown> = {}) => ({
  server,
  method,
  version: '2026-07-28',
  params: keyParamsOf(JSON.stringify({ params })),
  uri: typeof params.uri === 'string' ? params.uri : undefined,
})
const ctx = (subject: string): AuthContext => ({
  issuer: 'iss',
  subject,
  audience: ['aud'],
  scopes: ['s'],
  clientId: undefined,
})

function request(
  method = 'tools/list',
  params: Record<string, unknown> = {},
  subject?: string,
): CacheRequest {
  const p = parts(method, params)
  return {
    server,
    method,
    uri: typeof params.uri === 'string' ? params.uri : undefined,
    publicKey: cacheKey(p),
    privateKey: subject === undefined ? undefined : cacheKey(p, ctx(subject)),
  }
}
const answer = (over: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 1,
  result: {
    tools: [{ name: 'a' }, { name: 'b' }],
    resultType: 'complete',
    ttlMs: 60_000,
    cacheScope: 'public',
    ...over,
  },
})
const body = (h: HitParts) =>
  JSON.parse(Buffer.concat([h.head, h.body, h.tail]).toString('utf8')) as {
    id: unknown
    result: Record<string, unknown>
  }

describe('EdgeCache', () => {
  it('serves a stored public list with a decreasing ttl until it expires (injected clock)', () => {
    let now = 5_000
    const cache = new EdgeCache(config, { now: () => now })
    const req = request()
    expect(cache.capture(req, answer(), cache.generation(server))).toBeDefined()
    now += 20_000
    const slot = cache.lookup(req)
    expect(slot).toBeDefined()
    expect(body(cache.render(slot!, '"x"', 'tools/list', undefined))).toMatchObject({
      id: 'x',
      result: { ttlMs: 40_000 },
    })
    now += 39_999
    expect(cache.lookup(req)).toBeDefined()
    now += 1
    expect(cache.lookup(req)).toBeUndefined()
  })

  it('caps freshness at maxTtlMs', () => {
    let now = 0
    const cache = new EdgeCache({ ...config, maxTtlMs: 1_000 }, { now: () => now })
    const req = request()
    cache.capture(req, answer({ ttlMs: 60_000 }), 0)
    now = 999
    expect(cache.lookup(req)).toBeDefined()
    now = 1_000
    expect(cache.lookup(req)).toBeUndefined()
  })

  it('never stores an answer that was in flight across an invalidation', () => {
    const cache = new EdgeCache(config)
    const req = request()
    const generation = cache.generation(server)
    cache.invalidate(server, { kind: 'tools' })
    expect(cache.capture(req, answer(), generation)).toBeUndefined()
    expect(cache.lookup(req)).toBeUndefined()
  })

  it('keeps private answers to their own authorization context', () => {
    const cache = new EdgeCache(config)
    const alice = request('resources/read', { uri: 'docs://me' }, 'alice')
    const bob = request('resources/read', { uri: 'docs://me' }, 'bob')
    const entry = cache.capture(alice, answer({ cacheScope: 'private' }), 0)
    expect(entry?.key).toBe(alice.privateKey)
    expect(cache.lookup(alice)).toBeDefined()
    expect(cache.lookup(bob)).toBeUndefined()
    expect(cache.usableFor(entry!, bob)).toBe(false)
    // an anonymous caller (no private key) never sees it either
    expect(cache.lookup(request('resources/read', { uri: 'docs://me' }))).toBeUndefined()
  })

  it('does not store private answers when per-caller caching is off', () => {
    const cache = new EdgeCache({ ...config, private: false })
    const alice = { ...request('tools/list', {}, 'alice'), privateKey: undefined }
    expect(cache.capture(alice, answer({ cacheScope: 'private' }), 0)).toBeUndefined()
  })

  it('filters hits per caller view, memoising each filter key once per entry', () => {
    const cache = new EdgeCache(config, { now: () => 0 })
    const req = request()
    cache.capture(req, answer(), 0)
    let applied = 0
    const only = (name: string, identityDependent: boolean): ListFilter => ({
      key: `only:${name}`,
      identityDependent,
      apply: (_m, result) => {
        applied++
        return {
          ...result,
          tools: (result.tools as { name: string }[]).filter((t) => t.name === name),
        }
      },
    })
    const slot = cache.lookup(req)!
    const a1 = body(cache.render(slot, '1', 'tools/list', only('a', false)))
    const a2 = body(cache.render(slot, '2', 'tools/list', only('a', false)))
    const b = body(cache.render(slot, '3', 'tools/list', only('b', true)))
    expect(a1.result.tools).toEqual([{ name: 'a' }])
    expect(a1.result.cacheScope).toBe('public')
    expect(a2).toEqual({ ...a1, id: 2 })
    expect(b.result.tools).toEqual([{ name: 'b' }])
    // caching.mdx: a filter that depends on who asks makes the answer private
    expect(b.result.cacheScope).toBe('private')
    expect(applied).toBe(2)
    // the unfiltered entry is untouched
    expect(body(cache.render(slot, '4', 'tools/list', undefined)).result.tools).toHaveLength(2)
  })

  it('drops only what a notification covers', () => {
    const cache = new EdgeCache(config)
    const tools = request()
    const page2 = request('tools/list', { cursor: '2' })
    const prompts = request('prompts/list')
    const readA = request('resources/read', { uri: 'docs://a' })
    const readB = request('resources/read', { uri: 'docs://b' })
    for (const r of [tools, page2, prompts, readA, readB])
      cache.capture(r, answer(), cache.generation(server))
    expect(cache.invalidate(server, { kind: 'tools' })).toBe(2)
    expect(cache.lookup(prompts)).toBeDefined()
    expect(cache.invalidate(server, { kind: 'resource', uri: 'docs://a' })).toBe(1)
    expect(cache.lookup(readA)).toBeUndefined()
    expect(cache.lookup(readB)).toBeDefined()
    expect(cache.invalidate(serverTag('other', []), { kind: 'all' })).toBe(0)
    expect(cache.invalidate(server, { kind: 'all' })).toBe(2)
  })

  it('lets a key whose answer had no usable hints bypass the cache for 30 s (hit-for-pass)', () => {
    let now = 0
    const cache = new EdgeCache({ ...config, private: false }, { now: () => now })
    const req = request()
    expect(cache.isPass(req)).toBe(false)
    cache.capture(req, answer({ ttlMs: 0 }), 0)
    expect(cache.isPass(req)).toBe(true)
    now = 29_999
    expect(cache.isPass(req)).toBe(true)
    now = 30_000
    expect(cache.isPass(req)).toBe(false)
    // errors are transient: no pass
    cache.capture(req, { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'x' } }, 0)
    expect(cache.isPass(req)).toBe(false)
    // with cache.private, a private answer may still be kept for callers with a context
    const perCaller = new EdgeCache(config, { now: () => now })
    perCaller.capture(request(), answer({ cacheScope: 'private' }), 0)
    expect(perCaller.isPass(request())).toBe(false)
  })

  it('serves stale entries only within staleIfErrorMs', async () => {
    let now = 0
    const cache = new EdgeCache({ ...config, staleIfErrorMs: 10_000 }, { now: () => now })
    const req = request()
    cache.capture(req, answer({ ttlMs: 1_000 }), 0)
    now = 5_000
    expect(cache.lookup(req)).toBeUndefined()
    const stale = await cache.stale(req)
    expect(stale).toBeDefined()
    expect(body(cache.render(stale!, '1', 'tools/list', undefined)).result.ttlMs).toBe(0)
    now = 11_000
    expect(await cache.stale(req)).toBeUndefined()
  })

  it('keeps a gateway-built result under the same rules and byte bounds, in memory only', () => {
    const writes: string[] = []
    const drops: string[][] = []
    const shared = {
      connect: () => Promise.resolve(),
      status: () => ({ state: 'connected' as const }),
      get: () => Promise.resolve(undefined),
      set: (key: string) => void writes.push(key),
      delete: () => undefined,
      dropPrefixes: (prefixes: readonly string[]) => {
        drops.push([...prefixes])
        return Promise.resolve()
      },
      close: () => Promise.resolve(),
    }
    const cache = new EdgeCache(config, { shared })
    const key = cacheKey({ ...parts(), server: 'virtual#1', view: '[""]' })
    const req: CacheRequest = { ...request(), server: 'virtual#1', publicKey: key }
    expect(cache.keep(req, answer().result, cache.generation('virtual#1'))).toBe(true)
    expect(cache.lookup(req)).toBeDefined()
    expect(writes).toEqual([])
    // The same bounds as a backend's answer: too large, or without usable hints, is not kept.
    const big = { ...answer().result, tools: [{ name: 'x'.repeat(config.maxEntryBytes) }] }
    expect(cache.keep({ ...req, publicKey: `${key}big` }, big, 0)).toBe(false)
    expect(cache.keep({ ...req, publicKey: `${key}t0` }, { ...big, tools: [], ttlMs: 0 }, 0)).toBe(
      false,
    )
    // Dropped here only, and a result built before the drop is not kept after it.
    const generation = cache.generation('virtual#1')
    expect(cache.invalidate('virtual#1', { kind: 'all' }, false)).toBe(1)
    expect(drops).toEqual([])
    expect(cache.keep(req, answer().result, generation)).toBe(false)
    expect(cache.stats.entries).toBe(0)
  })

  it('lets a key whose answer could not be kept pass for a while', () => {
    let now = 0
    const cache = new EdgeCache(config, { now: () => now })
    const req = request('tools/list', { cursor: 'big' })
    expect(cache.isPass(req)).toBe(false)
    cache.cannotKeep(req)
    expect(cache.isPass(req)).toBe(true)
    now += 30_000
    expect(cache.isPass(req)).toBe(false)
  })

  it('drops entries built from a server when that server changes', () => {
    const cache = new EdgeCache(config)
    const key = cacheKey({ ...parts(), server: 'virtual#2', view: '[""]' })
    const merged: CacheRequest = { ...request(), server: 'virtual#2', publicKey: key }
    cache.buildsOn('virtual#2', [server])
    const building = cache.generation('virtual#2')
    expect(cache.keep(merged, answer().result, building)).toBe(true)
    expect(cache.capture(request(), answer(), cache.generation(server))).toBeDefined()
    expect(cache.invalidate(server, { kind: 'prompts' })).toBe(0)
    expect(cache.invalidate(server, { kind: 'tools' })).toBe(2)
    expect(cache.lookup(merged)).toBeUndefined()
    // One built before the change is not kept after it.
    expect(cache.keep(merged, answer().result, building)).toBe(false)
  })
})
