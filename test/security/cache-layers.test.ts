import { describe, expect, it } from 'vitest'
import { connectClient, connectLegacyClient, mcpPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { FAST_INVALIDATOR } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'

/**
 * Every cache layer is one store with one idea of a request (docs/security.md §The cache): a
 * virtual server's merged answers are entries of the edge cache, bounded by the same
 * `cache.maxBytes` and `cache.maxEntryBytes`, under the one canonical request key, client
 * capabilities included. Each test asserts what the clients got and what the member saw.
 */

const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const
const CAPS = 'io.modelcontextprotocol/clientCapabilities'
const MiB = 1024 * 1024

/**
 * A gateway with `cache` in front of `backend` as server `app`, and virtual server `all` over it,
 * its listen stream on `app` up.
 */
async function virtualGateway(
  backend: SdkTestServer,
  cache: Record<string, unknown> = {},
): Promise<TestGateway> {
  const gw = await startTestGateway(
    {
      cache,
      servers: { app: { upstreams: [{ url: backend.url }] } },
      virtualServers: { all: { members: ['app'] } },
    },
    { closeMs: 100, start: { watch: false, cache: { invalidator: FAST_INVALIDATOR } } },
  )
  // The listen stream, once acknowledged, drops what it covers: up before any list is asked.
  await expect
    .poll(() => gw.cache?.invalidator.isConnected('app'), { message: 'the listen stream' })
    .toBe(true)
  return gw
}

/** The capabilities each tools/list the member received declared. */
function capabilitiesSeen(backend: SdkTestServer): unknown[] {
  return backend.calls('tools/list').map((r) => {
    const body = r.json() as { params?: { _meta?: Record<string, unknown> } }
    return body.params?._meta?.[CAPS]
  })
}

function names(result: { tools: readonly { name: string }[] }): string[] {
  return result.tools.map((t) => t.name)
}

/** The tools/list pages the member answered without a cursor (first pages). */
function firstPages(backend: SdkTestServer): number {
  return backend.calls('tools/list').filter((r) => {
    const body = r.json() as { params?: { cursor?: unknown } }
    return body.params?.cursor === undefined
  }).length
}

describe('cache layers: client capabilities are part of the merged answer key', () => {
  it('never serves a list built for a client that can elicit to one that cannot, in either era', async () => {
    const backend = await closing(
      startSdkServer({ toolsByCapability: true, cacheHints: { 'tools/list': PUBLIC_60S } }),
    )
    const gw = await virtualGateway(backend)
    const url = gw.mcpUrl('all')
    const eliciting = await connectClient(url, { pin: true })
    const plain = await connectClient(url, { pin: true, capabilities: {} })
    const legacyPlain = await connectLegacyClient(url, { capabilities: {} })
    const legacyEliciting = await connectLegacyClient(url)
    try {
      expect(names(await eliciting.listTools())).toContain('confirm_action')
      // The member built that list for a client that can elicit; this one cannot.
      expect(names(await plain.listTools())).not.toContain('confirm_action')
      expect(names(await legacyPlain.listTools())).not.toContain('confirm_action')
      expect(names(await legacyEliciting.listTools())).toContain('confirm_action')
    } finally {
      await Promise.all([eliciting, plain, legacyPlain, legacyEliciting].map((c) => c.close()))
    }
    // The member was asked once per set of capabilities: the plain clients of both eras shared
    // one list (they send the member the same request), each eliciting client got its own.
    const seen = capabilitiesSeen(backend)
    expect(seen.filter((c) => JSON.stringify(c) === '{}')).toHaveLength(1)
    expect(seen.filter((c) => JSON.stringify(c) !== '{}')).toHaveLength(2)
    expect(seen).toHaveLength(3)
  })

  it('keys the merged answer by every param, as the edge cache does', async () => {
    const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
    const gw = await virtualGateway(backend)
    const url = gw.mcpUrl('all')
    expect((await mcpPost(url, 'tools/list', { region: 'eu' }, { id: 1 })).status).toBe(200)
    expect((await mcpPost(url, 'tools/list', { region: 'us' }, { id: 2 })).status).toBe(200)
    const regions = backend
      .calls('tools/list')
      .map((r) => (r.json() as { params?: { region?: unknown } }).params?.region)
    expect(regions).toEqual(['eu', 'us'])
    // The same request again is a hit on its own entry.
    const again = await mcpPost(url, 'tools/list', { region: 'eu' }, { id: 3 })
    expect(again.response()).toMatchObject({ id: 3, result: { tools: expect.any(Array) } })
    expect(backend.calls('tools/list')).toHaveLength(2)
  })
})

describe('cache layers: a member change drops the merged answers built from it', () => {
  it('drops them when the edge cache hears the change, with no client listening', async () => {
    const extraTools: string[] = []
    const backend = await closing(
      startSdkServer({ extraTools, cacheHints: { 'tools/list': PUBLIC_60S } }),
    )
    const gw = await virtualGateway(backend)
    const url = gw.mcpUrl('all')
    const listed = async (id: number): Promise<string[]> =>
      names((await mcpPost(url, 'tools/list', {}, { id })).response().result as never)
    expect(await listed(1)).not.toContain('added_later')
    expect(await listed(2)).not.toContain('added_later') // a merged hit
    expect(backend.calls('tools/list')).toHaveLength(1)
    extraTools.push('added_later')
    backend.notify.toolsChanged()
    await expect
      .poll(() => gw.cache?.cache.stats.entries, { message: 'member and merged entries dropped' })
      .toBe(0)
    expect(await listed(3)).toContain('added_later')
    expect(backend.calls('tools/list')).toHaveLength(2)
  })
})

describe('cache layers: merged answers are bounded by the cache byte limits', () => {
  it('does not keep a merged answer larger than maxEntryBytes, for either era', async () => {
    const backend = await closing(
      startSdkServer({
        cacheHints: { 'tools/list': PUBLIC_60S },
        descriptions: { get_forecast: 'x'.repeat(1.5 * MiB) },
      }),
    )
    const gw = await virtualGateway(backend, { maxEntryBytes: MiB })
    const url = gw.mcpUrl('all')
    const described = (
      tools: readonly { name: string; description?: string | undefined }[],
    ): number => tools.find((t) => t.name === 'get_forecast')?.description?.length ?? 0
    // Raw requests for 2026-07-28: the official client keeps a list itself for its ttl.
    for (const id of [1, 2]) {
      const res = await mcpPost(url, 'tools/list', {}, { id })
      expect(res.response()).toMatchObject({ id, result: { tools: expect.any(Array) } })
      expect(described((res.response().result as { tools: [] }).tools)).toBe(1.5 * MiB)
    }
    const legacy = await connectLegacyClient(url)
    try {
      for (let i = 0; i < 2; i++)
        expect(described((await legacy.listTools()).tools)).toBe(1.5 * MiB)
    } finally {
      await legacy.close()
    }
    // Every list reached the member: neither its answer nor the merged one fits an entry.
    expect(backend.calls('tools/list')).toHaveLength(4)
    expect(gw.cache?.cache.stats.entries).toBe(0)
  })

  it('evicts merged answers with the member answers past maxBytes, one accounting for both', async () => {
    const description = 'y'.repeat(900 * 1024)
    const backend = await closing(
      startSdkServer({
        toolsPageSize: 1,
        cacheHints: { 'tools/list': PUBLIC_60S },
        descriptions: Object.fromEntries(
          ['get_forecast', 'get_alerts', 'slow_forecast', 'confirm_action', 'delete_station'].map(
            (t) => [t, description],
          ),
        ),
      }),
    )
    const maxBytes = 4 * MiB
    const gw = await virtualGateway(backend, { maxBytes, maxEntryBytes: 2 * MiB })
    const url = gw.mcpUrl('all')
    let cursor: string | undefined
    let pages = 0
    do {
      const res = await mcpPost(url, 'tools/list', cursor === undefined ? {} : { cursor })
      const result = res.response().result as { tools: unknown[]; nextCursor?: string }
      expect(result.tools).toHaveLength(1)
      cursor = result.nextCursor
      pages++
      // Member pages and merged pages of about 0.9 MiB each, in one tier of 4 MiB.
      expect(gw.cache?.cache.stats.bytes).toBeLessThanOrEqual(maxBytes)
    } while (cursor !== undefined)
    expect(pages).toBe(6)
    const gauge = await gw.metrics.registry.getSingleMetric('mcp_edge_cache_bytes')?.get()
    expect(gauge?.values[0]?.value).toBeLessThanOrEqual(maxBytes)
    // The first page was pushed out by the later ones: asking again reaches the member.
    const before = firstPages(backend)
    const again = await mcpPost(url, 'tools/list', {}, { id: 'again' })
    expect(again.response()).toMatchObject({ id: 'again', result: { tools: expect.any(Array) } })
    expect(firstPages(backend)).toBe(before + 1)
  })
})
