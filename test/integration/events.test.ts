import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import * as z from 'zod'
import { connectClient, connectLegacyClient, mcpPost, rawRequest } from '../helpers/clients.js'
import {
  EVENTS_EXTENSION,
  startEventsServer,
  webhookSignature,
  type EventsTestServer,
} from '../helpers/events-server.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'

const POLICY = `
rules:
  - name: ci-events
    servers: ["*"]
    allow:
      events: ["ci.*"]
  - name: no-secrets
    servers: ["*"]
    deny:
      events: ["ci.secret*"]
`

const ListResult = z.looseObject({ events: z.array(z.looseObject({ name: z.string() })) })
const PollResult = z.looseObject({
  events: z.array(z.looseObject({ name: z.string(), data: z.unknown() })),
  cursor: z.string(),
})
const Empty = z.looseObject({})

function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-events-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

/** The event names the backend was asked about, per method. */
function asked(server: EventsTestServer, method: string): string[] {
  return server.calls(method).map((r) => (r.json() as { params: { name: string } }).params.name)
}

interface Received {
  readonly headers: IncomingMessage['headers']
  readonly body: string
}

/** A real webhook receiver on 127.0.0.1:0: records each POST and answers 204. */
async function startReceiver(): Promise<{
  url: string
  received: Received[]
  close(): Promise<void>
}> {
  const received: Received[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') })
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

async function setup(extra: Record<string, unknown> = {}, server: Record<string, unknown> = {}) {
  const backend = await closing(startEventsServer({ heartbeatMs: 50 }))
  const gw = await startTestGateway(
    { ...oneServer(backend.url, server), policies: '.', ...extra },
    { dir: policyDir(POLICY) },
  )
  return { backend, gw }
}

function audits(gw: TestGateway): Record<string, unknown>[] {
  return gw.logs.filter((l) => l.audit === true)
}

describe('events through a server endpoint (v2 client, 2026-07-28)', () => {
  it('lists only allowed event types and answers a denied one as unknown, forwarding nothing', async () => {
    const { backend, gw } = await setup()
    const client = await closing(connectClient(gw.mcpUrl('app'), { pin: true }))
    const listed = await client.request({ method: 'events/list', params: {} }, ListResult)
    expect(listed.events.map((e) => e.name)).toEqual(['ci.failed'])

    await backend.emit('ci.failed', { job: 7 })
    const polled = await client.request(
      { method: 'events/poll', params: { name: 'ci.failed', arguments: {} } },
      PollResult,
    )
    expect(polled.events.map((e) => e.data)).toEqual([{ job: 7 }])
    // the cursor goes back byte for byte
    const again = await client.request(
      { method: 'events/poll', params: { name: 'ci.failed', cursor: polled.cursor } },
      PollResult,
    )
    expect(again.events).toEqual([])
    expect(
      (backend.calls('events/poll')[1]?.json() as { params: { cursor: string } }).params.cursor,
    ).toBe(polled.cursor)

    for (const [method, name] of [
      ['events/poll', 'ci.secret_rotated'],
      ['events/poll', 'deploy.done'],
      ['events/stream', 'ci.secret_rotated'],
      ['events/subscribe', 'deploy.done'],
      ['events/unsubscribe', 'ci.secret_rotated'],
    ] as const) {
      await expect(
        client.request({ method, params: { name, arguments: {} } }, Empty),
      ).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining(`Unknown event: ${name}`),
      })
    }
    expect(asked(backend, 'events/poll')).toEqual(['ci.failed', 'ci.failed'])
    for (const m of ['events/stream', 'events/subscribe', 'events/unsubscribe'])
      expect(backend.calls(m)).toEqual([])
    const denied = audits(gw).filter((a) => a.decision === 'deny')
    expect(denied.map((a) => [a.kind, a.target, a.rule])).toEqual([
      ['event', 'ci.secret_rotated', 'no-secrets'],
      ['event', 'deploy.done', null],
      ['event', 'ci.secret_rotated', 'no-secrets'],
      ['event', 'deploy.done', null],
      ['event', 'ci.secret_rotated', 'no-secrets'],
    ])
  })

  it('passes the backend’s extension advertisement through server/discover', async () => {
    const { gw } = await setup()
    const res = await mcpPost(gw.mcpUrl('app'), 'server/discover')
    const result = res.response().result as { capabilities: { extensions?: object } }
    expect(result.capabilities.extensions).toHaveProperty([EVENTS_EXTENSION])
  })

  it('holds events/stream open as a stream: pushes and heartbeats arrive, a disconnect cancels upstream', async () => {
    const { backend, gw } = await setup({ limits: { maxStreamsPerPrincipal: 1 } })
    const client = await closing(connectClient(gw.mcpUrl('app'), { pin: true }))
    const pushed: unknown[] = []
    let beats = 0
    client.setNotificationHandler(
      'notifications/events/event',
      { params: z.looseObject({ event: z.looseObject({ data: z.unknown() }) }) },
      (params) => void pushed.push(params.event.data),
    )
    client.setNotificationHandler(
      'notifications/events/heartbeat',
      { params: z.looseObject({}) },
      () => void beats++,
    )
    const abort = new AbortController()
    const stream = client
      .request({ method: 'events/stream', params: { name: 'ci.failed' } }, Empty, {
        signal: abort.signal,
        timeout: 60_000,
      })
      .catch((e: unknown) => e)
    await expect.poll(() => backend.openStreams).toBe(1)
    await backend.emit('ci.failed', { job: 1 })
    await expect.poll(() => pushed).toEqual([{ job: 1 }])
    await expect.poll(() => beats).toBeGreaterThan(1)

    // the stream counts against the caller's stream cap, as a listen stream does
    const second = await mcpPost(gw.mcpUrl('app'), 'events/stream', { name: 'ci.failed' })
    expect(second.status).toBe(429)
    expect(second.response().error).toMatchObject({ code: -31029 })
    expect(backend.calls('events/stream')).toHaveLength(1)

    abort.abort()
    await stream
    await expect.poll(() => backend.abortedStreams).toBe(1)
    expect(backend.openStreams).toBe(0)
  })
})

describe('events/stream lifetime', () => {
  it('is not cut as idle while the server sends heartbeats', async () => {
    const { backend, gw } = await setup({}, { timeouts: { streamIdleMs: 300 } })
    const res = mcpPost(
      gw.mcpUrl('app'),
      'events/stream',
      { name: 'ci.failed' },
      { timeoutMs: 1200 },
    )
    await expect.poll(() => backend.openStreams).toBe(1)
    const read = await res
    // read until the client gave up: four idle periods, the stream still open and beating
    expect(read.truncated).toBe(true)
    const beats = read.messages().filter((m) => m.method === 'notifications/events/heartbeat')
    expect(beats.length).toBeGreaterThan(4)
    await expect.poll(() => backend.abortedStreams).toBe(1)
  })

  it('ends with the gateway’s drain, cancelling the upstream request', async () => {
    const backend = await closing(startEventsServer({ heartbeatMs: 50 }))
    const gw = await startTestGateway(oneServer(backend.url), { autoClose: false })
    const res = mcpPost(
      gw.mcpUrl('app'),
      'events/stream',
      { name: 'ci.failed' },
      { timeoutMs: 10_000 },
    )
    await expect.poll(() => backend.openStreams).toBe(1)
    await gw.close(100)
    const read = await res
    expect(read.truncated).toBe(false)
    await expect.poll(() => backend.abortedStreams).toBe(1)
  })
})

describe('rate limits and metrics on events', () => {
  it('counts event types under events: in limits, and events methods in the request metrics', async () => {
    const backend = await closing(startEventsServer())
    const dir = policyDir(`${POLICY}
limits:
  - name: polls
    servers: ["*"]
    events: ["ci.*"]
    key: ip
    rate: 1/minute
`)
    const gw = await startTestGateway(
      { ...oneServer(backend.url), policies: '.', admin: { host: '127.0.0.1', port: 0 } },
      { dir },
    )
    const first = await mcpPost(gw.mcpUrl('app'), 'events/poll', { name: 'ci.failed' })
    expect(first.status).toBe(200)
    const second = await mcpPost(gw.mcpUrl('app'), 'events/poll', { name: 'ci.failed' })
    expect(second.status).toBe(429)
    expect(backend.calls('events/poll')).toHaveLength(1)
    // another method without an event type is not counted
    expect((await mcpPost(gw.mcpUrl('app'), 'events/list')).status).toBe(200)
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).toMatch(/mcp_method_name="events\/poll"/)
    expect(text).toMatch(/mcp_method_name="events\/list"/)
  })
})

describe('webhook callbacks (events/subscribe)', () => {
  it('refuses every callback when events.callbacks is not set, nothing forwarded', async () => {
    const { backend, gw } = await setup()
    const res = await mcpPost(gw.mcpUrl('app'), 'events/subscribe', {
      name: 'ci.failed',
      delivery: { mode: 'webhook', url: 'https://hooks.example.com/x', secret: 'whsec_AAAA' },
    })
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 1, error: { code: -32602 } })
    expect(backend.calls('events/subscribe')).toEqual([])
  })

  it('lets a backend POST signed events to an allowed callback, refuses loopback and metadata addresses', async () => {
    const receiver = await closing(startReceiver())
    const { backend, gw } = await setup({}, { events: { callbacks: [receiver.url] } })
    const client = await closing(connectClient(gw.mcpUrl('app'), { pin: true }))
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
    const sub = await client.request(
      {
        method: 'events/subscribe',
        params: {
          name: 'ci.failed',
          arguments: {},
          delivery: { mode: 'webhook', url: receiver.url, secret },
        },
      },
      z.looseObject({ id: z.string(), refreshBefore: z.string() }),
    )
    // the URL reached the backend exactly as the client wrote it
    expect(backend.subscriptions.get(sub.id)?.url).toBe(receiver.url)
    await backend.emit('ci.failed', { job: 9 })
    expect(receiver.received).toHaveLength(1)
    const hit = receiver.received[0] as Received
    expect(hit.headers['x-mcp-subscription-id']).toBe(sub.id)
    expect(hit.headers['webhook-signature']).toBe(
      webhookSignature(
        secret,
        String(hit.headers['webhook-id']),
        String(hit.headers['webhook-timestamp']),
        hit.body,
      ),
    )

    const port = Number(new URL(receiver.url).port)
    for (const url of [
      `http://127.0.0.1:${port + 1}/hook`,
      `http://127.0.0.1:${port}/other`,
      'http://169.254.169.254/latest/meta-data/',
      'https://[::1]/hook',
      `http://2130706433:${port}/hook`,
    ]) {
      await expect(
        client.request(
          {
            method: 'events/subscribe',
            params: { name: 'ci.failed', delivery: { mode: 'webhook', url, secret } },
          },
          Empty,
        ),
        url,
      ).rejects.toMatchObject({ code: -32602 })
    }
    expect(backend.calls('events/subscribe')).toHaveLength(1)
    await client.request(
      { method: 'events/unsubscribe', params: { name: 'ci.failed', arguments: {} } },
      Empty,
    )
    expect(backend.subscriptions.size).toBe(0)
  })
})

describe('events for a 2025-11-25 client (SDK v1)', () => {
  it('lists filtered, polls allowed types, and gets a denied one as unknown', async () => {
    const { backend, gw } = await setup()
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    const listed = await client.request({ method: 'events/list', params: {} }, ListResult)
    expect(listed.events.map((e) => e.name)).toEqual(['ci.failed'])
    await backend.emit('ci.failed', { job: 3 })
    const polled = await client.request(
      { method: 'events/poll', params: { name: 'ci.failed' } },
      PollResult,
    )
    expect(polled.events.map((e) => e.data)).toEqual([{ job: 3 }])
    await expect(
      client.request({ method: 'events/poll', params: { name: 'deploy.done' } }, Empty),
    ).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('Unknown event') })
    expect(asked(backend, 'events/poll')).toEqual(['ci.failed'])
  })
})

describe('events on a virtual server', () => {
  it('merges two members’ events/list by the tool naming rules and routes by name', async () => {
    const ci = await closing(startEventsServer({ name: 'ci', events: ['ci.failed', 'shared'] }))
    const ops = await closing(
      startEventsServer({ name: 'ops', events: ['ci.ops', 'shared', 'ci.secret_key'] }),
    )
    const gw = await startTestGateway(
      {
        servers: {
          ci: { upstreams: [{ url: ci.url }] },
          ops: { upstreams: [{ url: ops.url }] },
        },
        virtualServers: { work: { members: ['ci', 'ops'], prefix: 'always' } },
        policies: '.',
      },
      {
        dir: policyDir(`
rules:
  - name: all
    servers: ["*"]
    allow:
      events: ["*"]
  - name: no-secrets
    servers: [ops]
    deny:
      events: ["ci.secret*"]
`),
      },
    )
    const client = await closing(connectClient(gw.mcpUrl('work'), { pin: true }))
    const listed = await client.request({ method: 'events/list', params: {} }, ListResult)
    const names = listed.events.map((e) => e.name)
    expect(names).toHaveLength(4)
    const opsShared = names.find((n) => n.startsWith('ops') && n.endsWith('shared')) as string
    expect(opsShared).toBeDefined()
    expect(names.some((n) => n.includes('secret'))).toBe(false)

    await ops.emit('shared', { from: 'ops' })
    await ci.emit('shared', { from: 'ci' })
    const polled = await client.request(
      { method: 'events/poll', params: { name: opsShared } },
      PollResult,
    )
    expect(polled.events.map((e) => e.data)).toEqual([{ from: 'ops' }])
    // the member was asked with its own name
    expect(asked(ops, 'events/poll')).toEqual(['shared'])
    expect(ci.calls('events/poll')).toEqual([])

    // ops' denied type under the name the virtual server would expose it by
    const secret = `${opsShared.slice(0, -'shared'.length)}ci.secret_key`
    await expect(
      client.request({ method: 'events/poll', params: { name: secret } }, Empty),
    ).rejects.toMatchObject({ code: -32602 })
    expect(asked(ops, 'events/poll')).toEqual(['shared'])

    // discovery advertises the extension because the members do
    const discovered = await mcpPost(gw.mcpUrl('work'), 'server/discover')
    const caps = (discovered.response().result as { capabilities: { extensions?: object } })
      .capabilities
    expect(caps.extensions).toHaveProperty([EVENTS_EXTENSION])

    // a push stream routed to its member, with the member's own name
    const stream = mcpPost(
      gw.mcpUrl('work'),
      'events/stream',
      { name: opsShared },
      { timeoutMs: 1500 },
    )
    await expect.poll(() => ops.openStreams).toBe(1)
    await ops.emit('shared', { pushed: true })
    const read = await stream
    const pushed = read.messages().filter((m) => m.method === 'notifications/events/event')
    expect(pushed.map((m) => (m.params as { event: { data: unknown } }).event.data)).toEqual([
      { pushed: true },
    ])
    expect(asked(ops, 'events/stream')).toEqual(['shared'])
    await expect.poll(() => ops.abortedStreams).toBe(1)
  })
})

describe('events on a virtual server for a 2025-11-25 client (SDK v1)', () => {
  it('advertises the extension at initialize, merges the lists and routes a poll', async () => {
    const ci = await closing(startEventsServer({ name: 'ci', events: ['build.done'] }))
    const ops = await closing(startEventsServer({ name: 'ops', events: ['page.sent'] }))
    const gw = await startTestGateway({
      servers: { ci: { upstreams: [{ url: ci.url }] }, ops: { upstreams: [{ url: ops.url }] } },
      virtualServers: { work: { members: ['ci', 'ops'], prefix: 'never' } },
    })
    const client = await closing(connectLegacyClient(gw.mcpUrl('work')))
    expect(client.getServerCapabilities()).toMatchObject({ extensions: { [EVENTS_EXTENSION]: {} } })
    const listed = await client.request({ method: 'events/list', params: {} }, ListResult)
    expect(listed.events.map((e) => e.name)).toEqual(['build.done', 'page.sent'])
    await ops.emit('page.sent', { to: 'oncall' })
    const polled = await client.request(
      { method: 'events/poll', params: { name: 'page.sent' } },
      PollResult,
    )
    expect(polled.events.map((e) => e.data)).toEqual([{ to: 'oncall' }])
    expect(ci.calls('events/poll')).toEqual([])
  })
})

describe('events/stream through a virtual server', () => {
  it("gives the caller's stream slot back each time the stream ends", async () => {
    const { backend, gw } = await setup({
      limits: { maxStreamsPerPrincipal: 1 },
      virtualServers: { desk: { members: ['app'], prefix: 'never' } },
    })
    for (let i = 0; i < 3; i++) {
      // The client reads a while, then goes; the member's stream is cancelled with it.
      const read = await mcpPost(
        gw.mcpUrl('desk'),
        'events/stream',
        { name: 'ci.failed' },
        { timeoutMs: 400, id: i },
      )
      expect(read.status).toBe(200)
      expect(read.truncated).toBe(true)
      await expect.poll(() => backend.openStreams).toBe(0)
    }
    expect(backend.calls('events/stream')).toHaveLength(3)
  })
})
