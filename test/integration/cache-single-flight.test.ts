import type { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { mcpHeaders } from '../helpers/clients.js'
import { httpHead, stalledRequest } from '../helpers/raw-socket.js'
import { sseEvent, startNonValidatingBackend, type Behaviour } from '../helpers/sdk-servers.js'
import { cacheEvents, cacheGateway, post, rawBody } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const

/** A public tools/list answer for request `id` of about `bytes` bytes. */
function bigList(id: unknown, bytes: number): string {
  const description = 'x'.repeat(1000)
  const count = Math.ceil(bytes / 1050)
  const tools = Array.from({ length: count }, (_, i) => ({
    name: `tool_${i}`,
    description,
    inputSchema: { type: 'object' },
  }))
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    result: { tools, resultType: 'complete', ...PUBLIC_60S },
  })
}

/** Rejects with `what` when `promise` takes longer than `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/**
 * Sends a tools/list over a raw socket and never reads the answer: the socket is paused, so the
 * gateway's writes to it back up as soon as the kernel buffers are full.
 */
function stalledClient(url: string, id: string): Socket {
  const u = new URL(url)
  const body = rawBody(id)
  const headers = Object.entries({
    ...mcpHeaders('tools/list'),
    host: u.host,
    'content-length': String(Buffer.byteLength(body)),
  })
  return stalledRequest(Number(u.port), httpHead('POST', u.pathname, headers) + body)
}

describe('edge cache: single flight', () => {
  it('answers waiters at the backend pace when the first client never reads a 4 MiB list', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const backend = await closing(
      startNonValidatingBackend({
        behaviour: async (req, body) => {
          if (req.rpcMethod !== 'tools/list') return 'normal'
          if (backendCalls() === 1) await gate
          const id = (body as { id?: unknown }).id
          return {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: bigList(id, 4 * 1024 * 1024),
          }
        },
      }),
    )
    const backendCalls = (): number => backend.calls('tools/list').length
    const gw = await cacheGateway(backend.url, { maxEntryBytes: 16 << 20, maxBytes: 64 << 20 })
    stalledClient(gw.app, '0')
    await expect
      .poll(() => backendCalls() === 1, { message: 'the first list to reach the backend' })
      .toBe(true)
    const waiters = ['1', '2', '3'].map((id) => post(gw.app, id))
    await expect
      .poll(() => gw.cache?.cache.stats.waiters === 3, {
        message: 'three requests waiting on the first',
      })
      .toBe(true)
    release()
    // streamIdleMs (300 s by default) is what a stalled capture would wait for.
    const answers = await within(Promise.all(waiters), 5000, 'the waiters')
    for (const [i, res] of answers.entries()) {
      expect(res.status).toBe(200)
      expect(res.text.startsWith(`{"jsonrpc":"2.0","id":${i + 1},"result":{"tools":[`)).toBe(true)
      expect(res.text.length).toBeGreaterThan(4 * 1024 * 1024)
    }
    expect(backendCalls()).toBe(1)
    expect(await cacheEvents(gw, 'coalesced')).toBe(3)
  })

  it('gives each waiter its own deadline (responseHeadersMs), then its own upstream request', async () => {
    let lists = 0
    const backend = await closing(
      startNonValidatingBackend({
        toolsListCache: PUBLIC_60S,
        // The first list opens an SSE stream and never answers on it; later ones answer at once.
        behaviour: (req): Behaviour =>
          req.rpcMethod === 'tools/list' && ++lists === 1
            ? { sse: [sseEvent({ jsonrpc: '2.0', method: 'notifications/message' })], end: false }
            : 'normal',
      }),
    )
    const gw = await cacheGateway(
      backend.url,
      {},
      {
        servers: {
          app: { upstreams: [{ url: backend.url }], timeouts: { responseHeadersMs: 500 } },
        },
      },
    )
    const leader = post(gw.app, '0', 'tools/list', {}, {})
    void leader.catch(() => undefined)
    await expect
      .poll(() => backend.calls('tools/list').length === 1, { message: 'the first list upstream' })
      .toBe(true)
    const started = performance.now()
    const waiters = ['1', '2', '3'].map((id) => post(gw.app, id))
    await expect
      .poll(() => gw.cache?.cache.stats.waiters === 3, {
        message: 'three requests waiting on the first',
      })
      .toBe(true)
    const answers = await within(Promise.all(waiters), 5000, 'the waiters')
    const elapsed = performance.now() - started
    for (const res of answers) {
      expect(res.status).toBe(200)
      expect((res.response().result as { tools: unknown[] }).tools).toHaveLength(3)
    }
    expect(elapsed).toBeGreaterThanOrEqual(450)
    expect(backend.calls('tools/list').length).toBeGreaterThanOrEqual(2)
    expect(gw.cache?.cache.stats.waiters).toBe(0)
  })
})
