import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { LEGACY_INITIALIZE, mcpPost, rawPost, rawRequest } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startLegacyV1Server, startSdkServer, type TestServer } from '../helpers/sdk-servers.js'
import { openListen, type OpenStream } from '../helpers/streams.js'

// A limit that holds on a member's own endpoint holds through a virtual server (docs/security.md):
// every request and stream the gateway opens to a member for a caller counts against that
// member's limits for as long as it is open, in the same buckets as its own endpoint's; a listen
// is admitted whole or not at all (docs/virtual-servers.md "listen").

const RULES = `
rules:
  - { name: all, servers: ["*"], allow: { tools: ["*"], prompts: ["*"], resources: ["*"] } }
`

function policyDir(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-virtual-limits-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), RULES + text)
  return dir
}

function upstreams(members: Record<string, { readonly url: string }>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(members).map(([name, s]) => [name, { upstreams: [{ url: s.url }] }]),
  )
}

/** The listen streams the virtual server opened on a 2026-07-28 member. */
const memberListens = (server: TestServer) =>
  server
    .calls('subscriptions/listen')
    .filter((r) => String((r.json() as { id: unknown }).id).startsWith('mcp-edge-virtual'))

/** The standalone GET streams a 2025-era member was asked for. */
const gets = (server: TestServer) => server.requests.filter((r) => r.method === 'GET')

const as = (user: string) => ({ headers: { 'x-user': user } })

async function expectRefused(stream: OpenStream, id: unknown, limit?: string): Promise<void> {
  expect(stream.status).toBe(429)
  expect(stream.headers['retry-after']).toMatch(/^[1-9][0-9]*$/)
  expect(await stream.json()).toMatchObject({
    id,
    error: {
      code: -31029,
      data: { source: 'gateway', reason: 'rate_limited', ...(limit && { limit }) },
    },
  })
}

const LISTEN_LIMIT_ON_A = `
limits:
  - name: a-listens
    servers: [a]
    methods: [subscriptions/listen]
    key: header:x-user
    concurrency: 1
`

describe('subscriptions/listen through a virtual server (2026-07-28 client)', () => {
  it("holds a member's listen concurrency limit; a refused listen holds no stream on any member", async () => {
    const a = await closing(startSdkServer({ name: 'a' }))
    const b = await closing(startSdkServer({ name: 'b' }))
    const gw = await startTestGateway(
      {
        policies: '.',
        servers: upstreams({ a, b }),
        virtualServers: { ws: { members: ['a', 'b'] } },
      },
      { dir: policyDir(LISTEN_LIMIT_ON_A) },
    )
    const ws = gw.mcpUrl('ws')
    const first = await openListen(ws, 'l1', as('u1'))
    expect(first.status).toBe(200)
    await expect.poll(() => memberListens(a).length).toBe(1)
    await expect.poll(() => memberListens(b).length).toBe(1)
    // Three more listens of u1: each refused by a's limit, before anything is opened anywhere
    // (b has no limit, and holds no stream for them either).
    for (const id of ['l2', 'l3', 'l4'])
      await expectRefused(await openListen(ws, id, as('u1')), id, 'a-listens')
    expect(memberListens(a)).toHaveLength(1)
    expect(memberListens(b)).toHaveLength(1)
    // The slot is the one a's own endpoint counts: a direct listen of u1 is refused too.
    await expectRefused(await openListen(gw.mcpUrl('a'), 'd1', as('u1')), 'd1', 'a-listens')
    expect(a.calls('subscriptions/listen')).toHaveLength(1)
    // Another caller has its own slot.
    const other = await openListen(ws, 'o1', as('u2'))
    expect(other.status).toBe(200)
    await expect.poll(() => memberListens(a).length).toBe(2)
    // The slot is held for as long as the stream is open, and given back when it closes.
    first.close()
    await expect
      .poll(async () => {
        const again = await openListen(ws, 'l5', as('u1'))
        if (again.status !== 200) await again.json()
        return again.status
      })
      .toBe(200)
  })

  it("counts a listen's capability reads as the member's server/discover", async () => {
    const a = await closing(startSdkServer({ name: 'a' }))
    const b = await closing(startSdkServer({ name: 'b' }))
    const gw = await startTestGateway(
      {
        policies: '.',
        servers: upstreams({ a, b }),
        virtualServers: { ws: { members: ['a', 'b'] } },
      },
      {
        dir: policyDir(`
limits:
  - { name: b-discovers, servers: [b], methods: [server/discover], key: header:x-user, rate: 1/hour }
`),
      },
    )
    const listen = await openListen(gw.mcpUrl('ws'), 'l1', as('u1'))
    expect(listen.status).toBe(200)
    await expect.poll(() => memberListens(b).length).toBe(1)
    const discovers = b.calls('server/discover').length
    const direct = await mcpPost(gw.mcpUrl('b'), 'server/discover', {}, { id: 'd', ...as('u1') })
    expect(direct.status).toBe(429)
    expect(direct.response()).toMatchObject({
      id: 'd',
      error: { data: { reason: 'rate_limited', limit: 'b-discovers' } },
    })
    expect(b.calls('server/discover')).toHaveLength(discovers)
    // Over the limit, a second listen is refused whole: no stream on a either.
    await expectRefused(await openListen(gw.mcpUrl('ws'), 'l2', as('u1')), 'l2', 'b-discovers')
    expect(memberListens(a)).toHaveLength(1)
  })
})

const KEY = 'a-test-key-of-at-least-16-chars'
const LEGACY = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
}
const GET = { accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25' }

describe('the GET stream through a virtual server (2025-11-25 client)', () => {
  it('holds the listen limits of a 2026-07-28 member and a 2025-only member', async () => {
    const a = await closing(startSdkServer({ name: 'a' }))
    const c = await closing(startLegacyV1Server())
    const gw = await startTestGateway(
      {
        legacySessions: { key: KEY },
        policies: '.',
        servers: upstreams({ a, c }),
        virtualServers: { ws: { members: ['a', 'c'] } },
      },
      {
        dir: policyDir(`${LISTEN_LIMIT_ON_A}
  - { name: c-listens, servers: [c], methods: [subscriptions/listen], key: header:x-user, concurrency: 1 }
`),
      },
    )
    const ws = gw.mcpUrl('ws')
    const session = async (user: string): Promise<string> => {
      const init = await rawPost(ws, LEGACY_INITIALIZE, { ...LEGACY, 'x-user': user })
      expect(init.status).toBe(200)
      return String(init.headers['mcp-session-id'])
    }
    const sid = await session('u1')
    const headers = { ...GET, 'mcp-session-id': sid, 'x-user': 'u1' }
    const abort = new AbortController()
    onTestFinished(() => abort.abort())
    const first = await request(ws, { method: 'GET', headers, signal: abort.signal })
    expect(first.statusCode).toBe(200)
    first.body.on('error', () => undefined)
    await expect.poll(() => memberListens(a).length).toBe(1)
    await expect.poll(() => gets(c).length).toBe(1)
    // A second GET of u1, in the same session or another: refused, nothing opened on a or c.
    const again = await rawRequest('GET', ws, { headers })
    const other = await rawRequest('GET', ws, {
      headers: { ...headers, 'mcp-session-id': await session('u1') },
    })
    for (const res of [again, other]) {
      expect(res.status).toBe(429)
      expect(res.json()).toMatchObject({
        error: { code: -31029, data: { source: 'gateway', reason: 'rate_limited' } },
      })
    }
    expect(memberListens(a)).toHaveLength(1)
    expect(gets(c)).toHaveLength(1)
    // The slot on a is the one its own endpoint counts.
    await expectRefused(await openListen(gw.mcpUrl('a'), 'd1', as('u1')), 'd1', 'a-listens')
    // Given back when the client's stream ends.
    abort.abort()
    await expect
      .poll(async () => {
        const ctl = new AbortController()
        onTestFinished(() => ctl.abort())
        const res = await request(ws, { method: 'GET', headers, signal: ctl.signal })
        res.body.on('error', () => undefined)
        if (res.statusCode !== 200) await res.body.text()
        return res.statusCode
      })
      .toBe(200)
  })
})

describe('the GET stream on a server’s own endpoint (2025-11-25 client)', () => {
  it('counts as its listen stream, as it does through a virtual server', async () => {
    const c = await closing(startLegacyV1Server())
    const gw = await startTestGateway(
      { legacySessions: { key: KEY }, policies: '.', servers: upstreams({ c }) },
      {
        dir: policyDir(`
limits:
  - { name: c-listens, servers: [c], methods: [subscriptions/listen], key: header:x-user, concurrency: 1 }
`),
      },
    )
    const url = gw.mcpUrl('c')
    const open = async () => {
      const init = await rawPost(url, LEGACY_INITIALIZE, { ...LEGACY, 'x-user': 'u1' })
      expect(init.status).toBe(200)
      return { ...GET, 'mcp-session-id': String(init.headers['mcp-session-id']), 'x-user': 'u1' }
    }
    const abort = new AbortController()
    onTestFinished(() => abort.abort())
    const first = await request(url, { method: 'GET', headers: await open(), signal: abort.signal })
    expect(first.statusCode).toBe(200)
    first.body.on('error', () => undefined)
    await expect.poll(() => gets(c).length).toBe(1)
    const second = await rawRequest('GET', url, { headers: await open(), timeoutMs: 2000 })
    expect(second.status).toBe(429)
    expect(second.json()).toMatchObject({
      error: {
        code: -31029,
        data: { source: 'gateway', reason: 'rate_limited', limit: 'c-listens' },
      },
    })
    expect(gets(c)).toHaveLength(1)
  })
})
