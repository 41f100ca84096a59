import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpPost, rawPost, LEGACY_INITIALIZE } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { poolConfig, startReplica, startReplicas, type Fault } from '../helpers/replicas.js'
import { startLegacyV1Server, startSdkServer } from '../helpers/sdk-servers.js'
import {
  heldStreamsBackend,
  LISTEN_ACK as ACK,
  openListen,
  streamOf,
  type OpenStream,
} from '../helpers/streams.js'
import { claimsFor, generateTestKey, mintToken } from '../helpers/tokens.js'

/**
 * Long-lived streams (subscriptions/listen, 2025-era GET streams) have budgets of their own: a
 * per-caller cap (429 too_many_streams) and a per-replica budget apart from maxInFlight (503
 * streams_at_capacity), so one caller holding idle streams cannot starve everyone else
 * (docs/balancing.md "Streams").
 */

/** A listen stream that is acknowledged and then stays open. */
const OPEN_LISTEN: Fault = { sse: [ACK] }

const listenOr =
  (listen: Fault) =>
  (c: { method: string }): Fault =>
    c.method === 'subscriptions/listen' ? listen : 'ok'

/** Opens `n` listen streams and waits until each was acknowledged by the backend. */
async function openAcknowledged(
  url: string,
  n: number,
  prefix: string,
  opts = {},
): Promise<OpenStream[]> {
  const streams: OpenStream[] = []
  for (let i = 0; i < n; i++) {
    const s = await openListen(url, `${prefix}-${i}`, opts)
    expect(s.status, `stream ${i}`).toBe(200)
    streams.push(s)
  }
  for (const s of streams) await expect.poll(() => s.text()).toContain('acknowledged')
  return streams
}

/** Asserts a gateway refusal: status, reason, JSON-RPC code, echoed id and Retry-After. */
async function expectRefused(
  s: OpenStream,
  status: number,
  reason: string,
  code: number,
  id: string | number | null,
): Promise<void> {
  expect(s.status).toBe(status)
  expect(s.headers['retry-after']).toBe('1')
  expect(s.headers['x-mcp-gateway-error']).toBe(reason)
  expect(await s.json()).toMatchObject({
    jsonrpc: '2.0',
    id,
    error: { code, data: { source: 'gateway', reason } },
  })
}

/** Every count the gateway keeps for streams and requests, for the "back to zero" checks. */
function counts(gw: TestGateway): { callers: number; streams: number[]; inFlight: number[] } {
  const b = gw.ref.current.servers.get('app')?.balancing
  if (b === undefined) throw new Error('no server app')
  return {
    callers: b.lifecycle.openStreams(),
    streams: b.replicas.map((u) => u.streams),
    inFlight: b.replicas.map((u) => u.inFlight),
  }
}

async function expectAllZero(gw: TestGateway): Promise<void> {
  const replicas = gw.ref.current.servers.get('app')?.balancing.replicas.length ?? 0
  const zero = { callers: 0, streams: Array(replicas).fill(0), inFlight: Array(replicas).fill(0) }
  await expect.poll(() => counts(gw), { timeout: 5000 }).toEqual(zero)
}

/** An undici agent whose connections come from another loopback address (another client). */
function agentFrom(localAddress: string): Agent {
  const agent = new Agent({ localAddress })
  onTestFinished(() => agent.close())
  return agent
}

describe('per-caller stream cap (limits.maxStreamsPerPrincipal)', () => {
  it('idle listen streams of one caller leave maxInFlight to everyone; past the cap 429', async () => {
    const backend = await startSdkServer()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      limits: { maxStreamsPerPrincipal: 4 },
      ...poolConfig([backend], { maxInFlight: 2 }),
    })
    const url = gw.mcpUrl('app')
    // Four streams on a replica that takes two requests at once: streams have their own budget.
    const held = await openAcknowledged(url, 4, 'hog')
    for (let i = 0; i < 3; i++) {
      const res = await mcpPost(url, 'tools/list', {}, { id: `list-${i}` })
      expect(res.status, 'ordinary requests still served').toBe(200)
    }
    // The same caller (same address, no auth) asks for a fifth: 429, nothing forwarded.
    const fifth = await openListen(url, 'hog-4')
    await expectRefused(fifth, 429, 'too_many_streams', -31029, 'hog-4')
    expect(backend.calls('subscriptions/listen')).toHaveLength(4)
    // Another client address is another caller.
    const other = await openListen(url, 'other-0', { dispatcher: agentFrom('127.0.0.2') })
    expect(other.status).toBe(200)
    await expect.poll(() => other.text()).toContain('acknowledged')
    for (const s of [...held, other]) s.close()
    await expectAllZero(gw)
    // The slots came back: the first caller may open streams again.
    const again = await openListen(url, 'hog-5')
    expect(again.status).toBe(200)
  })

  it('an anonymous caller is its connection address: X-Forwarded-For and friends change nothing', async () => {
    const r = await startReplica('r0', listenOr(OPEN_LISTEN))
    const gw = await startTestGateway({
      limits: { maxStreamsPerPrincipal: 1 },
      ...poolConfig([r]),
    })
    const url = gw.mcpUrl('app')
    await openAcknowledged(url, 1, 'first')
    const spoofs = [
      { 'x-forwarded-for': '203.0.113.7' },
      { forwarded: 'for=203.0.113.8' },
      { 'x-real-ip': '203.0.113.9' },
    ]
    for (const [i, headers] of spoofs.entries()) {
      const s = await openListen(url, i, { headers })
      await expectRefused(s, 429, 'too_many_streams', -31029, i)
    }
    expect(r.count('subscriptions/listen')).toBe(1)
  })

  it('an authenticated caller is its issuer and subject, whatever its address or token', async () => {
    const r = await startReplica('r0', listenOr(OPEN_LISTEN))
    const key = await generateTestKey('ES256')
    const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-streams-'))
    await writeFile(join(dir, 'idp.pem'), key.pem)
    const iss = 'https://idp.example.com'
    const publicUrl = 'https://mcp.example.com'
    const gw = await startTestGateway(
      {
        auth: { publicUrl, jwt: { issuer: iss, publicKeyFile: 'idp.pem' } },
        limits: { maxStreamsPerPrincipal: 2 },
        ...poolConfig([r]),
      },
      { dir },
    )
    const url = gw.mcpUrl('app')
    const bearer = async (sub: string, extra = {}): Promise<Record<string, string>> => ({
      authorization: `Bearer ${await mintToken(claimsFor(iss, `${publicUrl}/mcp/app`, { sub, ...extra }), { key })}`,
    })
    await openAcknowledged(url, 2, 'alice', { headers: await bearer('alice') })
    // A fresh token for the same subject, from another address: still alice.
    const third = await openListen(url, 'alice-2', {
      headers: await bearer('alice', { jti: 'another-token' }),
      dispatcher: agentFrom('127.0.0.3'),
    })
    await expectRefused(third, 429, 'too_many_streams', -31029, 'alice-2')
    expect(r.count('subscriptions/listen')).toBe(2)
    // Bob shares alice's address but not her allowance.
    await openAcknowledged(url, 2, 'bob', { headers: await bearer('bob') })
    expect(r.count('subscriptions/listen')).toBe(4)
  })

  it('2025-era GET streams count against the same cap', async () => {
    const backend = await startLegacyV1Server()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      limits: { maxStreamsPerPrincipal: 1 },
      legacySessions: { key: 'a-test-key-of-at-least-16-chars' },
      ...poolConfig([backend]),
    })
    const url = gw.mcpUrl('app')
    const legacy = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    }
    const init = await rawPost(url, LEGACY_INITIALIZE, legacy)
    expect(init.status).toBe(200)
    const session = { ...legacy, 'mcp-session-id': String(init.headers['mcp-session-id']) }
    const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' }
    expect((await rawPost(url, initialized, session)).status).toBe(202)
    const get = async (): Promise<OpenStream> =>
      streamOf(
        await request(url, { method: 'GET', headers: { ...session, accept: 'text/event-stream' } }),
      )
    const first = await get()
    expect(first.status).toBe(200)
    const second = await get()
    await expectRefused(second, 429, 'too_many_streams', -31029, null)
    expect(backend.requests.filter((q) => q.method === 'GET')).toHaveLength(1)
    first.close()
    await expectAllZero(gw)
    const third = await get()
    expect(third.status).toBe(200)
  })
})

describe('per-replica stream budget (servers.<name>.maxStreams)', () => {
  it('answers 503 streams_at_capacity once every replica is full, and still serves requests', async () => {
    const rs = await startReplicas(2, listenOr(OPEN_LISTEN))
    const gw = await startTestGateway({
      limits: { maxStreamsPerPrincipal: 10 },
      ...poolConfig(rs, { maxStreams: 1, maxInFlight: 1 }),
    })
    const url = gw.mcpUrl('app')
    const held = await openAcknowledged(url, 2, 'fill')
    expect(rs.map((r) => r.count('subscriptions/listen'))).toEqual([1, 1]) // one on each replica
    const t0 = performance.now()
    const over = await openListen(url, 'over')
    await expectRefused(over, 503, 'streams_at_capacity', -31503, 'over')
    expect(performance.now() - t0).toBeLessThan(1000)
    expect(rs.map((r) => r.count('subscriptions/listen'))).toEqual([1, 1])
    // maxInFlight 1 per replica, yet both streams leave room for ordinary requests.
    for (let i = 0; i < 4; i++)
      expect((await mcpPost(url, 'tools/call', { name: 'x' })).status).toBe(200)
    held[0]?.close()
    await expect.poll(() => counts(gw).streams.reduce((a, b) => a + b, 0)).toBe(1)
    const next = await openListen(url, 'next')
    expect(next.status).toBe(200)
  })
})

describe('stream counts return to zero however a stream ends', () => {
  it.each([
    'the client closes it',
    'the backend ends it',
    'the backend resets it',
    'the gateway drains',
  ])('%s', async (how) => {
    const backend = await heldStreamsBackend()
    const gw = await startTestGateway(
      {
        limits: { maxStreamsPerPrincipal: 3 },
        shutdown: { drainMs: 3000 },
        ...poolConfig([backend]),
      },
      { autoClose: how !== 'the gateway drains' },
    )
    const streams = await Promise.all([0, 1, 2].map((i) => openListen(gw.mcpUrl('app'), i)))
    for (const s of streams) expect(s.status).toBe(200)
    await expect.poll(() => backend.held.length).toBe(3)
    expect(counts(gw)).toMatchObject({ callers: 3, streams: [3] })
    if (how === 'the client closes it') for (const s of streams) s.close()
    if (how === 'the backend ends it') for (const res of backend.held) res.end()
    if (how === 'the backend resets it')
      for (const res of backend.held) res.socket?.resetAndDestroy()
    if (how === 'the gateway drains') await gw.close()
    for (const s of streams) await s.ended
    await expectAllZero(gw)
  })

  it('a stream refused after it was counted (no replica reachable) gives its slot back', async () => {
    const r = await startReplica('r0', listenOr(OPEN_LISTEN))
    const gw = await startTestGateway({ limits: { maxStreamsPerPrincipal: 1 }, ...poolConfig([r]) })
    await r.kill()
    for (let i = 0; i < 3; i++) {
      const s = await openListen(gw.mcpUrl('app'), i)
      await expectRefused(s, 503, 'no_upstream', -31503, i)
      await expectAllZero(gw) // otherwise the second try would be a 429
    }
    expect(r.count('subscriptions/listen')).toBe(0)
  })
})
