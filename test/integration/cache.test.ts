import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { connectClient, mcpHeaders, rawPost, type RawResponse } from '../helpers/clients.js'
import {
  SDK_SERVER_TOOLS,
  sseEvent as sseFrame,
  startNonValidatingBackend,
  startSdkServer,
  type BehaviourHook,
} from '../helpers/sdk-servers.js'
import { cacheEvents, cacheGateway, manualClock, post } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const
const JSON_HEADERS = { 'content-type': 'application/json' }

/** Ids a cache must echo byte for byte: big integers, escapes, non-ASCII (MCP ids are strings or integers). */
const AWKWARD_IDS = [
  '12345678901234567890',
  '"caf\\u00e9 \\"quoted\\" \\\\ \\/ id"',
  '"é-ü"',
  '-98765432109876543210',
  '"x"',
]

function toolNames(res: RawResponse): string[] {
  const result = res.response().result as { tools?: { name: string }[] }
  return (result.tools ?? []).map((t) => t.name)
}

/** A backend reply for `id` with this result (as the behaviour hook's exact response). */
function reply(body: unknown, result: Record<string, unknown>) {
  const id = (body as { id?: unknown }).id
  return {
    status: 200,
    headers: JSON_HEADERS,
    body: JSON.stringify({ jsonrpc: '2.0', id, result }),
  }
}

describe('edge cache: public lists', () => {
  it('answers 500 concurrent cold tools/list with one backend request; every client gets its own id', async () => {
    // The backend holds the first list until every other request waits on it: a cold stampede.
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const backend = await closing(
      startNonValidatingBackend({
        toolsListCache: PUBLIC_60S,
        behaviour: async (req) => {
          if (req.rpcMethod === 'tools/list') await gate
          return 'normal' as const
        },
      }),
    )
    const gw = await cacheGateway(backend.url)
    const leader = post(gw.app, '0')
    await expect
      .poll(() => backend.calls('tools/list').length === 1, {
        message: 'the first list to reach the backend',
      })
      .toBe(true)
    const ids = Array.from({ length: 499 }, (_, i) => AWKWARD_IDS[i] ?? String(i + 1))
    const flood = Promise.all(ids.map((id) => post(gw.app, id)))
    await expect
      .poll(() => gw.cache?.cache.stats.waiters === 499, {
        message: '499 requests waiting on the first',
        timeout: 15_000,
      })
      .toBe(true)
    release()
    const round1 = await flood
    expect((await leader).status).toBe(200)
    round1.forEach((res, i) => {
      expect(res.status).toBe(200)
      // S-13: the requester's exact id token, not a re-serialised one.
      expect(res.text.startsWith(`{"jsonrpc":"2.0","id":${ids[i]},"result":{`)).toBe(true)
      expect(toolNames(res)).toEqual(['echo', 'search', 'delete_repo'])
    })
    expect(backend.calls('tools/list')).toHaveLength(1)

    const round2 = await Promise.all(ids.map((id) => post(gw.app, id)))
    expect(
      round2.every(
        (r, i) => r.status === 200 && r.text.startsWith(`{"jsonrpc":"2.0","id":${ids[i]},`),
      ),
    ).toBe(true)
    expect(backend.calls('tools/list')).toHaveLength(1)
    expect(await cacheEvents(gw, 'coalesced')).toBe(499) // round one: waiters of the single flight
    expect(await cacheEvents(gw, 'hit')).toBe(998)
    expect(await cacheEvents(gw, 'miss')).toBe(1)
  })

  it('serves the official SDK server’s public list from the edge with ttlMs reduced by age', async () => {
    const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
    const clock = manualClock()
    const gw = await cacheGateway(backend.url, {}, {}, { cache: { now: clock.now } })
    // Until its listen is acknowledged, an answer in flight may predate a change and is not stored.
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the upstream listen stream',
      })
      .toBe(true)
    const cold = await Promise.all(Array.from({ length: 100 }, (_, i) => post(gw.app, String(i))))
    expect(cold.every((r) => r.status === 200)).toBe(true)
    expect(backend.calls('tools/list')).toHaveLength(1)
    clock.advance(30)
    const hit = (await post(gw.app, '"later"')).response()
    expect(hit.id).toBe('later')
    expect(hit.result).toMatchObject({ resultType: 'complete', cacheScope: 'public' })
    expect(hit.result?.ttlMs).toBeLessThan(60_000)
    expect(hit.result?.ttlMs).toBe(60_000 - 30) // exactly the entry's age on the cache clock
    expect(hit.result?._meta).toEqual({
      'io.modelcontextprotocol/serverInfo': { name: 'test-sdk', version: '1.0.0' },
    })
    // The official client works against cached answers (fresh clients: no client-side cache).
    for (let i = 0; i < 2; i++) {
      const client = await closing(connectClient(gw.app, { pin: true }))
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
    }
    expect(backend.calls('tools/list')).toHaveLength(1)
  })

  it('keeps each page, each resource and each protocol version apart', async () => {
    const backend = await closing(
      startSdkServer({
        toolsPageSize: 2,
        cacheHints: { 'tools/list': PUBLIC_60S, 'resources/read': PUBLIC_60S },
      }),
    )
    const gw = await cacheGateway(backend.url)
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the upstream listen stream',
      })
      .toBe(true)
    const pages = async () =>
      Promise.all(
        [undefined, '2', '4'].map((cursor, i) =>
          post(gw.app, String(i), 'tools/list', cursor === undefined ? {} : { cursor }),
        ),
      )
    const first = (await pages()).map(toolNames)
    const again = (await pages()).map(toolNames)
    expect(first).toEqual([
      SDK_SERVER_TOOLS.slice(0, 2),
      SDK_SERVER_TOOLS.slice(2, 4),
      SDK_SERVER_TOOLS.slice(4, 6),
    ])
    expect(again).toEqual(first)
    expect(backend.calls('tools/list')).toHaveLength(3)

    const read = async (uri: string) =>
      (await post(gw.app, '9', 'resources/read', { uri })).response().result
    const readme = await read('docs://readme')
    const changelog = await read('docs://changelog')
    expect(readme).not.toEqual(changelog)
    expect(await read('docs://readme')).toMatchObject({
      contents: (readme as { contents: unknown }).contents,
    })
    expect(backend.calls('resources/read')).toHaveLength(2)

    // A 2025-era request never reads a 2026-07-28 entry.
    const legacy = await rawPost(
      gw.app,
      { jsonrpc: '2.0', id: 5, method: 'tools/list', params: {} },
      {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
    )
    expect(legacy.status).toBe(200)
    expect(backend.calls('tools/list')).toHaveLength(4)
  })

  it('makes the next tools/list go to the backend after notifications/tools/list_changed', async () => {
    const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
    const gw = await cacheGateway(backend.url)
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the upstream listen stream',
      })
      .toBe(true)
    const listen = backend.calls('subscriptions/listen')[0]
    // One listen per server, with the gateway's own modern headers and envelope.
    expect(listen?.header('mcp-method')).toBe('subscriptions/listen')
    expect(listen?.header('mcp-protocol-version')).toBe('2026-07-28')
    expect(listen?.json()).toMatchObject({ params: { notifications: { toolsListChanged: true } } })
    await post(gw.app, '1')
    await post(gw.app, '2')
    expect(backend.calls('tools/list')).toHaveLength(1)
    backend.notify.toolsChanged()
    await expect
      .poll(async () => (await cacheEvents(gw, 'invalidate')) > 0, { message: 'the invalidation' })
      .toBe(true)
    expect((await post(gw.app, '3')).status).toBe(200)
    expect(backend.calls('tools/list')).toHaveLength(2)
    await post(gw.app, '4')
    expect(backend.calls('tools/list')).toHaveLength(2)
    expect(backend.calls('subscriptions/listen')).toHaveLength(1)
  })

  it('reconnects a listen stream that ends, with backoff, and drops what it covers on reconnect', async () => {
    const ack = sseFrame({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { toolsListChanged: true } },
    })
    // Every listen is acknowledged, then the backend ends the stream 1.5 s later.
    const backend = await closing(
      startNonValidatingBackend({
        toolsListCache: PUBLIC_60S,
        behaviour: (req) =>
          req.rpcMethod === 'subscriptions/listen' ? { sse: [ack], intervalMs: 1_500 } : 'normal',
      }),
    )
    const gw = await cacheGateway(backend.url)
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the first listen',
      })
      .toBe(true)
    const listen = backend.calls('subscriptions/listen')[0]?.json()
    expect(listen).toMatchObject({ params: { notifications: { toolsListChanged: true } } })
    await post(gw.app, '1')
    await post(gw.app, '2')
    expect(backend.calls('tools/list')).toHaveLength(1)
    // Whatever changed while no stream was open is unknown: the reconnect drops the lists.
    await expect
      .poll(() => backend.calls('subscriptions/listen').length >= 2, {
        message: 'a second listen',
        timeout: 5_000,
      })
      .toBe(true)
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, { message: 'the reconnect' })
      .toBe(true)
    await expect
      .poll(() => gw.cache?.cache.stats.entries === 0, { message: 'the drop on reconnect' })
      .toBe(true)
    await post(gw.app, '3')
    expect(backend.calls('tools/list')).toHaveLength(2)
    expect(gw.logs.some((l) => String(l.msg).includes('listen stream ended'))).toBe(true)
  })

  it('drops a cached resource on notifications/resources/updated for its URI only', async () => {
    const backend = await closing(startSdkServer({ cacheHints: { 'resources/read': PUBLIC_60S } }))
    const gw = await cacheGateway(backend.url)
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, {
        message: 'the upstream listen stream',
      })
      .toBe(true)
    const read = (uri: string) => post(gw.app, '1', 'resources/read', { uri })
    await read('docs://readme')
    await read('docs://changelog')
    // The gateway re-subscribes with the URIs it now holds (resources.subscribe).
    await expect
      .poll(
        () =>
          backend
            .calls('subscriptions/listen')
            .some((r) => JSON.stringify(r.json()).includes('docs://changelog')),
        { message: 'a listen that subscribes to the cached URIs' },
      )
      .toBe(true)
    await sleep(50) // let the new stream's acknowledgement land
    backend.notify.resourceUpdated('docs://readme')
    await expect
      .poll(async () => (await cacheEvents(gw, 'invalidate')) > 0, { message: 'the invalidation' })
      .toBe(true)
    await read('docs://readme')
    await read('docs://changelog')
    const uris = backend
      .calls('resources/read')
      .map((r) => (r.json() as { params: { uri: string } }).params.uri)
    expect(uris).toEqual(['docs://readme', 'docs://changelog', 'docs://readme'])
  })
})

describe('edge cache: never stores the uncacheable', () => {
  const cases: [string, BehaviourHook, boolean][] = [
    [
      'input_required results',
      (_r, b) =>
        reply(b, {
          resultType: 'input_required',
          inputRequests: {},
          requestState: 's',
          ...PUBLIC_60S,
        }),
      true,
    ],
    [
      'JSON-RPC errors',
      (_r, b) => ({
        status: 200,
        headers: JSON_HEADERS,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: (b as { id: unknown }).id,
          error: { code: -32603, message: 'boom' },
        }),
      }),
      false,
    ],
    [
      'HTTP errors',
      () => ({
        status: 500,
        headers: JSON_HEADERS,
        body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"x"}}',
      }),
      false,
    ],
    [
      'ttlMs 0',
      (_r, b) => reply(b, { tools: [], resultType: 'complete', ttlMs: 0, cacheScope: 'public' }),
      true,
    ],
    [
      'private results (cache.private off)',
      (_r, b) =>
        reply(b, { tools: [], resultType: 'complete', ttlMs: 60_000, cacheScope: 'private' }),
      true,
    ],
    ['results without hints', (_r, b) => reply(b, { tools: [], resultType: 'complete' }), true],
  ]

  it.each(cases)('%s', async (_name, hook, passes) => {
    const backend = await closing(
      startNonValidatingBackend({
        behaviour: (req, body) => (req.rpcMethod === 'tools/list' ? hook(req, body) : 'normal'),
      }),
    )
    const gw = await cacheGateway(backend.url)
    await post(gw.app, '1')
    await post(gw.app, '2')
    expect(backend.calls('tools/list')).toHaveLength(2)
    expect(gw.cache?.cache.stats.entries).toBe(0)
    // answers without usable hints send the key on a 30 s pass; errors do not
    expect(await cacheEvents(gw, 'pass')).toBe(passes ? 1 : 0)
  })

  it('MRTR retries carrying requestState or inputResponses are neither served nor stored', async () => {
    const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
    const gw = await cacheGateway(backend.url)
    await post(gw.app, '1', 'tools/list', { requestState: 'state-1' })
    await post(gw.app, '2', 'tools/list', { inputResponses: { x: { action: 'accept' } } })
    expect(gw.cache?.cache.stats.entries).toBe(0)
    await post(gw.app, '3') // a plain list is stored …
    await post(gw.app, '4', 'tools/list', { requestState: 'state-1' }) // … but never answers a retry
    expect(backend.calls('tools/list')).toHaveLength(4)
  })

  it('caches an SSE-framed final answer as one JSON response', async () => {
    const backend = await closing(
      startNonValidatingBackend({
        behaviour: (req, body) =>
          req.rpcMethod === 'tools/list'
            ? {
                sse: [
                  'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n\n',
                  `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: (body as { id: unknown }).id, result: { tools: [{ name: 't' }], resultType: 'complete', ...PUBLIC_60S } })}\n\n`,
                ],
              }
            : 'normal',
      }),
    )
    const gw = await cacheGateway(backend.url)
    const first = await post(gw.app, '1')
    expect(first.headers['content-type']).toContain('text/event-stream')
    const second = await post(gw.app, '2')
    expect(second.headers['content-type']).toBe('application/json')
    expect(toolNames(second)).toEqual(['t'])
    expect(backend.calls('tools/list')).toHaveLength(1)
  })
})

describe('edge cache: stale-if-error', () => {
  it('serves an expired entry within staleIfErrorMs when the backend fails, and logs it', async () => {
    const backend = await closing(
      startNonValidatingBackend({ toolsListCache: { ttlMs: 200, cacheScope: 'public' } }),
    )
    const clock = manualClock()
    const gw = await cacheGateway(
      backend.url,
      { staleIfErrorMs: 60_000 },
      {},
      { cache: { now: clock.now } },
    )
    await post(gw.app, '1')
    clock.advance(300) // past the 200 ms ttl, well within staleIfErrorMs
    backend.setBehaviour((req) => (req.rpcMethod === 'tools/list' ? 'reset' : 'normal'))
    const stale = await post(gw.app, '"s"')
    expect(stale.status).toBe(200)
    expect(stale.response()).toMatchObject({ id: 's', result: { ttlMs: 0, cacheScope: 'public' } })
    expect(
      gw.logs.some((l) => String(l.msg).includes('stale-if-error') && l.reason !== undefined),
    ).toBe(true)
    backend.setBehaviour(() => 'normal')
    await post(gw.app, '2')
    expect(backend.calls('tools/list').length).toBeGreaterThanOrEqual(3)
  })

  it('answers the upstream error when stale-if-error is off', async () => {
    const backend = await closing(
      startNonValidatingBackend({ toolsListCache: { ttlMs: 200, cacheScope: 'public' } }),
    )
    const clock = manualClock()
    const gw = await cacheGateway(backend.url, {}, {}, { cache: { now: clock.now } })
    await post(gw.app, '1')
    clock.advance(300) // past the 200 ms ttl
    backend.setBehaviour((req) => (req.rpcMethod === 'tools/list' ? 'reset' : 'normal'))
    expect((await post(gw.app, '2')).status).toBe(502)
  })
})

describe('edge cache: bounded', () => {
  it('never holds more than maxBytes however many distinct pages are asked for', async () => {
    const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
    const gw = await cacheGateway(backend.url, { maxBytes: 4096, maxEntryBytes: 2048 })
    for (let i = 0; i < 60; i++) await post(gw.app, String(i), 'tools/list', { cursor: `c${i}` })
    const stats = gw.cache?.cache.stats
    expect(stats?.bytes).toBeLessThanOrEqual(4096)
    expect(await cacheEvents(gw, 'evict')).toBeGreaterThan(0)
    const bytes = await gw.metrics.cacheBytes.get()
    expect(bytes.values[0]?.value).toBeLessThanOrEqual(4096)
  })

  it('relays an answer larger than maxEntryBytes in full, uncached, instead of failing it', async () => {
    const tools = Array.from({ length: 200 }, (_, i) => `tool_with_a_long_name_${i}`)
    const backend = await closing(startNonValidatingBackend({ tools, toolsListCache: PUBLIC_60S }))
    const gw = await cacheGateway(backend.url, { maxEntryBytes: 1024 })
    const first = await post(gw.app, '1')
    expect(first.status).toBe(200)
    expect(first.text.length).toBeGreaterThan(4096)
    expect((first.json() as { result: { tools: unknown[] } }).result.tools).toHaveLength(200)
    expect((await post(gw.app, '2')).status).toBe(200)
    expect(backend.calls('tools/list')).toHaveLength(2) // not stored: both went upstream
  })

  it('leaves requests whose headers disagree with the body to the classifier (nothing read or written)', async () => {
    const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
    const gw = await cacheGateway(backend.url)
    await post(gw.app, '1')
    const spoofed = await rawPost(
      gw.app,
      '{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{}}',
      mcpHeaders('tools/list'),
    )
    expect(spoofed.status).toBe(400)
    expect(await cacheEvents(gw, 'hit')).toBe(0)
  })
})
