import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpPost, rawPost, rawRequest, LEGACY_INITIALIZE } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { poolConfig, startReplica } from '../helpers/replicas.js'
import { startLegacyV1Server, type TestServer } from '../helpers/sdk-servers.js'

const KEY = 'a-test-key-of-at-least-16-chars'
const LEGACY_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
}

async function legacyBackends(): Promise<[TestServer, TestServer]> {
  const servers = await Promise.all([startLegacyV1Server(), startLegacyV1Server()])
  onTestFinished(() => Promise.all(servers.map((s) => s.close())).then(() => undefined))
  return servers
}

function gatewayConfig(
  backends: readonly TestServer[],
  key: string | null = KEY,
): Record<string, unknown> {
  return {
    ...poolConfig(backends, { balance: 'round-robin' }),
    ...(key !== null && { legacySessions: { key } }),
  }
}

/** A v1 client whose every HTTP request goes to the next gateway in turn. */
async function alternatingClient(
  gateways: readonly TestGateway[],
): Promise<{ client: V1Client; transport: V1Transport; hits: number[] }> {
  const hits = gateways.map(() => 0)
  let next = 0
  const fetchVia = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const i = next++ % gateways.length
    hits[i] = (hits[i] ?? 0) + 1
    const url = new URL(input instanceof Request ? input.url : input)
    const target = new URL((gateways[i] as TestGateway).url)
    url.host = target.host
    return fetch(url, init)
  }
  const transport = new V1Transport(new URL((gateways[0] as TestGateway).mcpUrl('app')), {
    fetch: fetchVia,
  })
  const client = new V1Client({ name: 'legacy-through-two-gateways', version: '1.0.0' })
  await client.connect(transport)
  onTestFinished(() => client.close())
  return { client, transport, hits }
}

function sessionIdsSeen(backend: TestServer): string[] {
  return backend.requests
    .map((r) => r.header('mcp-session-id'))
    .filter((s): s is string => s !== undefined)
}

async function initializeVia(gw: TestGateway): Promise<string> {
  const init = await rawPost(gw.mcpUrl('app'), LEGACY_INITIALIZE, LEGACY_HEADERS)
  expect(init.status).toBe(200)
  return String(init.headers['mcp-session-id'])
}

describe('2025-era sessions without shared state', () => {
  it('keep a v1 client working through two gateways in front of two v1 replicas', async () => {
    const backends = await legacyBackends()
    const gws = [
      await startTestGateway(gatewayConfig(backends)),
      await startTestGateway(gatewayConfig(backends)),
    ]
    const { client, transport, hits } = await alternatingClient(gws)
    for (let i = 0; i < 4; i++) {
      const res = await client.callTool({ name: 'echo', arguments: { text: `hi ${i}` } })
      expect(res.content).toEqual([{ type: 'text', text: `echo: hi ${i}` }])
    }
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['echo'])
    expect((await client.readResource({ uri: 'legacy://info' })).contents[0]).toMatchObject({
      text: 'a 2025-era server',
    })
    expect((await client.getPrompt({ name: 'hello' })).messages).toHaveLength(1)
    // Both gateways carried requests of the one session…
    expect(hits.every((n) => n >= 3)).toBe(true)
    // …which lives on exactly one replica, under the id that replica minted.
    const owner = backends.find((b) => sessionIdsSeen(b).length > 0) as TestServer
    const other = backends.find((b) => b !== owner) as TestServer
    expect(sessionIdsSeen(other)).toEqual([])
    const upstreamIds = new Set(sessionIdsSeen(owner))
    expect(upstreamIds.size).toBe(1)
    const clientId = transport.sessionId as string
    expect(clientId).toMatch(/^[A-Za-z0-9_-]{12}\.[A-Za-z0-9_-]+$/) // <replica tag>.<sealed>
    expect(upstreamIds.has(clientId)).toBe(false)
    // Encrypted: the backend's id is in none of the client-visible bytes, raw or decoded.
    const [upstreamId] = [...upstreamIds] as [string]
    const decoded = Buffer.from(clientId.split('.')[1] as string, 'base64url')
    expect(clientId.includes(upstreamId)).toBe(false)
    expect(decoded.includes(Buffer.from(upstreamId))).toBe(false)
    // The standalone GET stream went to the owner too (through one of the gateways).
    expect(owner.requests.filter((r) => r.method === 'GET').length).toBeGreaterThanOrEqual(1)
    // DELETE ends the session on its replica, through whichever gateway.
    await transport.terminateSession()
    expect(owner.requests.filter((r) => r.method === 'DELETE')).toHaveLength(1)
    expect(other.requests.filter((r) => r.method === 'DELETE')).toHaveLength(0)
  })

  it('answer 404 / -32001 to unknown, malformed, tampered or foreign session ids', async () => {
    const backends = await legacyBackends()
    const gw = await startTestGateway(gatewayConfig(backends))
    const foreign = await startTestGateway(
      gatewayConfig(backends, 'another-key-of-16-chars-or-more'),
    )
    const good = await initializeVia(gw)
    const [tag, sealed] = good.split('.') as [string, string]
    const flipped = `${sealed.slice(0, -2)}${sealed.at(-2) === 'A' ? 'B' : 'A'}${sealed.at(-1)}`
    const otherSid = Buffer.from('00000000-0000-4000-8000-000000000000').toString('base64url')
    const before = backends[0].requests.length + backends[1].requests.length
    for (const bad of [
      'abc',
      `${tag}.${flipped}`,
      `${tag}.${otherSid}`,
      `${tag}.${sealed}.${sealed}`,
      tag,
      `${tag}.${'A'.repeat(1100)}`,
      await initializeVia(foreign),
    ]) {
      const res = await rawPost(
        gw.mcpUrl('app'),
        { jsonrpc: '2.0', id: 4, method: 'tools/list' },
        { ...LEGACY_HEADERS, 'mcp-session-id': bad },
      )
      expect(res.status, bad).toBe(404)
      expect(res.json()).toMatchObject({
        id: 4,
        error: { code: -32001, data: { reason: 'session_not_found' } },
      })
    }
    const get = await rawRequest('GET', gw.mcpUrl('app'), {
      headers: { accept: 'text/event-stream', 'mcp-session-id': 'nope' },
    })
    expect(get.status).toBe(404)
    // Only the foreign gateway's own initialize reached a backend; no bad id was forwarded.
    expect(backends[0].requests.length + backends[1].requests.length).toBe(before + 1)
    const ok = await rawPost(
      gw.mcpUrl('app'),
      { jsonrpc: '2.0', id: 5, method: 'tools/list' },
      { ...LEGACY_HEADERS, 'mcp-session-id': good },
    )
    expect(ok.status).toBe(200)
  })

  it('answer 404 once the replica holding the session is gone, so the client starts over', async () => {
    const backends = await legacyBackends()
    const gw = await startTestGateway(gatewayConfig(backends))
    const id = await initializeVia(gw)
    const owner = backends.find((b) => b.requests.length > 0) as TestServer
    await owner.close()
    const res = await rawPost(
      gw.mcpUrl('app'),
      { jsonrpc: '2.0', id: 6, method: 'tools/list' },
      { ...LEGACY_HEADERS, 'mcp-session-id': id },
    )
    expect(res.status).toBe(404)
    expect(res.json()).toMatchObject({ id: 6, error: { code: -32001 } })
  })

  it('warn that several gateways need legacySessions.key when none is set and several may run', async () => {
    const backends = await legacyBackends()
    const warned = (gw: TestGateway): boolean =>
      gw.logs.some((l) => String(l['msg']).startsWith('legacySessions.key is not set'))
    // One process (a laptop, the demo): ids need open only here, so no warning.
    const alone = await startTestGateway(gatewayConfig(backends, null))
    expect(warned(alone)).toBe(false)
    expect((await initializeVia(alone)).split('.')).toHaveLength(2) // works within one gateway
    // A replica count says other instances serve the same clients.
    const several = await startTestGateway({
      ...gatewayConfig(backends, null),
      rateLimits: { replicas: 3 },
    })
    expect(warned(several)).toBe(true)
    const keyed = await startTestGateway({
      ...gatewayConfig(backends),
      rateLimits: { replicas: 3 },
    })
    expect(warned(keyed)).toBe(false)
  })

  it('leave 2026-07-28 traffic alone: no id rewriting, no pinning', async () => {
    const body = '{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete"}}'
    const r = await startReplica('r0', () => ({
      status: 200,
      body,
      contentType: 'application/json',
      headers: { 'mcp-session-id': 'from-upstream' },
    }))
    const gw = await startTestGateway({ legacySessions: { key: KEY }, ...poolConfig([r]) })
    const res = await mcpPost(
      gw.mcpUrl('app'),
      'tools/list',
      {},
      { headers: { 'mcp-session-id': 'client-made-up' } },
    )
    expect(res.status).toBe(200)
    expect(res.headers['mcp-session-id']).toBe('from-upstream')
    expect(r.calls[0]?.headers['mcp-session-id']).toBe('client-made-up')
  })
})
