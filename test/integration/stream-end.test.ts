import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { rawRequest } from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { heldStreamsBackend, openListen } from '../helpers/streams.js'

/**
 * A long-lived stream lets go of the stages once its head is written (pipeline/proxy.ts), so what
 * the stages do at a request's end hangs on the stream's own end: the access line and metrics, a
 * concurrency limit's slot, the stream slot. Each is checked while the stream is open and after.
 */

function listenLines(gw: TestGateway): Record<string, unknown>[] {
  return gw.logs.filter((l) => l.msg === 'request' && l.method === 'subscriptions/listen')
}

function policyDir(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-stream-end-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), text)
  return dir
}

describe('a stream that outlives the stages', () => {
  it('is logged and counted when it ends, with how it ended and its replica', async () => {
    const backend = await heldStreamsBackend()
    const gw = await startTestGateway({
      ...oneServer(backend.url),
      admin: { host: '127.0.0.1', port: 0 },
    })
    const url = gw.mcpUrl('app')
    const byBackend = await openListen(url, 'l-1')
    const byClient = await openListen(url, 'l-2')
    expect([byBackend.status, byClient.status]).toEqual([200, 200])
    await expect.poll(() => byClient.text()).toContain('acknowledged')
    await expect.poll(() => backend.held.length).toBe(2)
    // Open streams have no line yet: a line is written once, when the response is over.
    expect(listenLines(gw)).toEqual([])
    // The attempt loop is over once a stream's head is out: the streams count against their
    // replica's stream budget, no longer against the retry budget's requests in flight.
    const balancing = gw.ref.current.servers.get('app')?.balancing
    expect(balancing?.replicas.map((u) => [u.streams, u.inFlight])).toEqual([[2, 2]])
    expect(balancing?.budget.active).toBe(0)

    backend.held[0]?.end()
    expect(await byBackend.ended).toBe('end')
    await expect.poll(() => listenLines(gw)).toHaveLength(1)
    expect(listenLines(gw)[0]).toMatchObject({
      server: 'app',
      status: 200,
      outcome: 'ok',
      upstream: 'app#0',
    })

    byClient.close()
    await expect.poll(() => listenLines(gw)).toHaveLength(2)
    expect(listenLines(gw)[1]).toMatchObject({ status: 200, outcome: 'client_closed' })
    const ms = listenLines(gw).map((l) => l.ms as number)
    expect(ms.every((m) => m >= 0)).toBe(true)

    const metrics = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(metrics).toMatch(
      /mcp_edge_requests_total\{[^}]*method="subscriptions\/listen"[^}]*outcome="ok"[^}]*\} 1/,
    )
    expect(metrics).toMatch(
      /mcp_edge_requests_total\{[^}]*method="subscriptions\/listen"[^}]*outcome="client_closed"[^}]*\} 1/,
    )
    // The stream slots came back, and so did the replica's.
    await expect
      .poll(() => gw.ref.current.servers.get('app')?.balancing.lifecycle.openStreams())
      .toBe(0)
    expect(balancing?.replicas.map((u) => [u.streams, u.inFlight])).toEqual([[0, 0]])
  })

  it('books a stream that breaks against its replica when it breaks, not at its head', async () => {
    const [a, b] = [await heldStreamsBackend(), await heldStreamsBackend()]
    const gw = await startTestGateway({
      servers: {
        app: { upstreams: [{ url: a.url }, { url: b.url }], outlier: { consecutiveFailures: 1 } },
      },
    })
    const stream = await openListen(gw.mcpUrl('app'), 'l-break')
    expect(stream.status).toBe(200)
    await expect.poll(() => stream.text()).toContain('acknowledged')
    const balancing = gw.ref.current.servers.get('app')?.balancing
    const [held, replica] = a.held.length === 1 ? [a.held, 0] : [b.held, 1]
    const upstream = balancing?.replicas[replica]
    expect([upstream?.streams, upstream?.health.ejected]).toEqual([1, false])

    held[0]?.destroy() // the replica drops the stream mid-answer
    await expect.poll(() => listenLines(gw)).toHaveLength(1)
    expect(listenLines(gw)[0]).toMatchObject({ outcome: 'broken', upstream: `app#${replica}` })
    // The stream's end settled the replica's books: its stream slot, and the failure.
    expect([upstream?.streams, upstream?.inFlight, upstream?.health.ejected]).toEqual([0, 0, true])
    // The client is told, in the stream, that its request got no answer.
    await expect.poll(() => stream.text()).toContain('"id":"l-break"')
  })

  it('holds a concurrency limit’s slot until the stream ends, not until its head', async () => {
    const backend = await heldStreamsBackend()
    const gw = await startTestGateway(
      { ...oneServer(backend.url), policies: '.' },
      {
        dir: policyDir(`
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }
limits:
  - name: one-listen
    servers: [app]
    methods: [subscriptions/listen]
    key: none
    concurrency: 1
`),
      },
    )
    const url = gw.mcpUrl('app')
    const first = await openListen(url, 'first')
    expect(first.status).toBe(200)
    await expect.poll(() => first.text()).toContain('acknowledged')

    const second = await openListen(url, 'second')
    expect(second.status).toBe(429)
    expect(second.headers['x-mcp-gateway-error']).toBe('rate_limited')
    expect(await second.json()).toMatchObject({ id: 'second', error: { code: -31029 } })
    expect(backend.held).toHaveLength(1)

    first.close()
    await expect
      .poll(() => listenLines(gw).filter((l) => l.outcome === 'client_closed'))
      .toHaveLength(1)
    const third = await openListen(url, 'third')
    expect(third.status).toBe(200)
    await expect.poll(() => backend.held.length).toBe(2)
  })
})
