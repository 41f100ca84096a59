import { readdirSync } from 'node:fs'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * Spec (streamable-http §Cancellation): closing the SSE response stream is cancellation. A client
 * that goes away must take its upstream request with it, at once, and leave nothing behind.
 */

const fdCount = (): number => readdirSync('/proc/self/fd').length
const sockets = (): number =>
  process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length

/** Starts a slow SSE tool call and resolves once its first progress event arrived. */
async function startStream(url: string, id: number): Promise<AbortController> {
  const abort = new AbortController()
  const body = mcpBody(
    'tools/call',
    {
      name: 'slow_forecast',
      arguments: { city: 'Oslo', steps: 100 },
      _meta: { progressToken: id },
    },
    id,
  )
  const res = await request(url, {
    method: 'POST',
    headers: mcpHeaders('tools/call', 'slow_forecast'),
    body: JSON.stringify(body),
    signal: abort.signal,
  })
  expect(res.headers['content-type']).toBe('text/event-stream')
  const reader = res.body[Symbol.asyncIterator]()
  await reader.next() // the first progress frame: the stream is live end to end
  res.body.on('error', () => undefined)
  return abort
}

describe('client disconnects', () => {
  it('abort the upstream request within a second of a mid-SSE disconnect', async () => {
    const server = await startSdkServer()
    onTestFinished(() => server.close())
    const gw = await startTestGateway(oneServer(server.url))
    const abort = await startStream(gw.mcpUrl('app'), 1)
    const t0 = performance.now()
    abort.abort()
    await server.waitForAborts(1, 1000)
    expect(performance.now() - t0).toBeLessThan(1000)
    const line = await waitFor(() =>
      gw.logs.find((l) => l.msg === 'request' && l.method === 'tools/call'),
    )
    expect(line).toMatchObject({ outcome: 'client_closed', name: 'slow_forecast' })
  })

  it('leave sockets and file descriptors where they started after 200 disconnects', async () => {
    const server = await startSdkServer()
    onTestFinished(() => server.close())
    const gw = await startTestGateway(oneServer(server.url))
    // Warm the pools so steady-state keep-alive sockets are part of the baseline.
    await (await startStream(gw.mcpUrl('app'), 0)).abort()
    await server.waitForAborts(1)
    const pool0 = gw.ref.current.servers.get('app')?.balancing.replicas[0]?.dispatcher
    for (let i = 0; i < 100 && (pool0?.stats.connected ?? 0) > 1; i++)
      await new Promise((r) => setTimeout(r, 100))
    await settle()
    const fds = fdCount()
    const socks = sockets()
    for (let batch = 0; batch < 10; batch++) {
      const streams = await Promise.all(
        Array.from({ length: 20 }, (_, i) => startStream(gw.mcpUrl('app'), 1 + batch * 20 + i)),
      )
      for (const s of streams) s.abort()
    }
    await server.waitForAborts(201, 10_000)
    // The upstream pool may keep up to 20 idle keep-alive sockets for reuse; they are not leaks,
    // and they close after the keep-alive timeout (4 s). Wait for that, then compare.
    const pool = gw.ref.current.servers.get('app')?.balancing.replicas[0]?.dispatcher
    for (let i = 0; i < 100 && (pool?.stats.connected ?? 0) > 1; i++)
      await new Promise((r) => setTimeout(r, 100))
    await settle()
    expect(fdCount()).toBeLessThanOrEqual(fds + 4)
    expect(sockets()).toBeLessThanOrEqual(socks + 4)
    const closed = gw.logs.filter((l) => l.msg === 'request' && l.outcome === 'client_closed')
    expect(closed.length).toBeGreaterThanOrEqual(200)
  }, 60_000)
})

async function settle(): Promise<void> {
  // Closed sockets are released on the next turns of the event loop.
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 100))
}

async function waitFor<T>(fn: () => T | undefined, timeoutMs = 2000): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 20))
  }
}
