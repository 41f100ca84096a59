import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'
import {
  poolConfig,
  runLoad,
  startReplica,
  startReplicas,
  waitUntil,
  type MockReplica,
} from '../helpers/replicas.js'

const QUIET = { log: { level: 'warn' } }

/** Which replica answered (the mock names itself in the result). */
async function whoAnswers(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  headers = {},
): Promise<string> {
  const res = await mcpPost(url, method, params, { headers })
  expect(res.status, res.text).toBe(200)
  return String(res.response().result?.['replica'])
}

function shares(replicas: readonly MockReplica[], method = 'tools/call'): number[] {
  const counts = replicas.map((r) => r.count(method))
  const total = counts.reduce((a, b) => a + b, 0)
  return counts.map((c) => c / total)
}

describe('balancing across three replicas', () => {
  it('round-robin honours weights exactly over every window (smooth weighted round-robin)', async () => {
    const rs = await startReplicas(3)
    const gw = await startTestGateway({
      ...QUIET,
      ...poolConfig(rs, { balance: 'round-robin' }, [1, 1, 2]),
    })
    const order: string[] = []
    for (let i = 0; i < 200; i++)
      order.push(await whoAnswers(gw.mcpUrl('app'), 'tools/call', { name: 'x' }))
    expect(rs.map((r) => r.count('tools/call'))).toEqual([50, 50, 100])
    // Smooth: the heavy replica never gets three in a row, and every window of 4 has each replica.
    expect(order.join(',')).not.toMatch(/r2,r2,r2/)
    for (let i = 0; i + 4 <= order.length; i += 4)
      expect(new Set(order.slice(i, i + 4)).size).toBe(3)
  })

  it('least-request spreads concurrent load over every replica', async () => {
    const rs = await startReplicas(3, () => ({ delayMs: 5 }))
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
    await runLoad(240, 8, (i) => whoAnswers(gw.mcpUrl('app'), 'tools/call', { name: `t${i}` }))
    for (const s of shares(rs)) {
      expect(s).toBeGreaterThan(0.15)
      expect(s).toBeLessThan(0.5)
    }
  })

  it('least-request moves most traffic off a slow replica (reliability B-23)', async () => {
    const slow = await startReplica('slow', () => ({ delayMs: 250 }))
    const fast = await startReplicas(2, () => ({ delayMs: 5 }))
    const rs = [slow, ...fast]
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
    await runLoad(150, 6, (i) => whoAnswers(gw.mcpUrl('app'), 'tools/list', { cursor: String(i) }))
    // An even split would give it a third; P2C over in-flight counts keeps it far below.
    expect(shares(rs, 'tools/list')[0]).toBeLessThan(0.15)
  })

  it('round-robin gives the slow replica its full share, so the test above can fail', async () => {
    const slow = await startReplica('slow', () => ({ delayMs: 100 }))
    const fast = await startReplicas(2, () => ({ delayMs: 5 }))
    const rs = [slow, ...fast]
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs, { balance: 'round-robin' }) })
    await runLoad(60, 6, () => whoAnswers(gw.mcpUrl('app'), 'tools/list'))
    expect(shares(rs, 'tools/list')[0]).toBeGreaterThan(0.3)
  })

  it('hash on a header is sticky, spreads keys, and a lost replica moves only its own keys', async () => {
    const rs = await startReplicas(3)
    const gw = await startTestGateway({
      ...QUIET,
      ...poolConfig(rs, { balance: { hash: 'header:X-Tenant' } }),
    })
    const url = gw.mcpUrl('app')
    const owner = new Map<string, string>()
    for (let t = 0; t < 30; t++) {
      const tenant = `tenant-${t}`
      const seen = new Set<string>()
      for (let i = 0; i < 3; i++)
        seen.add(await whoAnswers(url, 'tools/list', {}, { 'x-tenant': tenant }))
      expect(seen.size, tenant).toBe(1)
      owner.set(tenant, [...seen][0] as string)
    }
    const used = new Set(owner.values())
    expect(used.size).toBe(3)
    await rs[1]?.kill()
    for (const [tenant, before] of owner) {
      const now = await whoAnswers(url, 'tools/list', {}, { 'x-tenant': tenant })
      if (before === 'r1') expect(now).not.toBe('r1')
      else expect(now, tenant).toBe(before) // rendezvous hashing: only r1's keys moved
    }
    // Without the header the request is balanced by least-request instead.
    expect(['r0', 'r2']).toContain(await whoAnswers(url, 'tools/list'))
  })

  it('hash on a verified claim keeps each caller on one replica', async () => {
    const rs = await startReplicas(3)
    const key = await generateTestKey('ES256')
    const jwks = await startJwks([key])
    onTestFinished(() => jwks.close())
    const iss = 'https://idp.example.com'
    const publicUrl = 'https://mcp.example.com'
    const gw = await startTestGateway({
      ...QUIET,
      auth: { publicUrl, jwt: { issuer: iss, jwksUrl: jwks.url } },
      ...poolConfig(rs, { balance: { hash: 'claim:sub' } }),
    })
    const owners = new Set<string>()
    for (let u = 0; u < 15; u++) {
      const bearer = await mintToken(claimsFor(iss, `${publicUrl}/mcp/app`, { sub: `user-${u}` }), {
        key,
      })
      const seen = new Set<string>()
      for (let i = 0; i < 3; i++) {
        const res = await mcpPost(gw.mcpUrl('app'), 'tools/list', {}, { auth: bearer })
        expect(res.status, res.text).toBe(200)
        seen.add(String(res.response().result?.['replica']))
      }
      expect(seen.size).toBe(1)
      owners.add([...seen][0] as string)
    }
    expect(owners.size).toBeGreaterThanOrEqual(2)
  })

  it('routes named tools and prompts to their own replicas, byte for byte', async () => {
    const rs = await startReplicas(3)
    const [r0, r1, r2] = rs as [MockReplica, MockReplica, MockReplica]
    const routes = [
      { tools: ['render_video*', 'transcode'], upstreams: [{ url: r2.url }] },
      { prompts: ['secret'], upstreams: [{ url: r2.url }] },
    ]
    const gw = await startTestGateway({
      ...QUIET,
      servers: { app: { upstreams: [{ url: r0.url }, { url: r1.url }], routes } },
    })
    const url = gw.mcpUrl('app')
    for (const name of ['render_video', 'render_video_4k', 'transcode']) {
      expect(await whoAnswers(url, 'tools/call', { name })).toBe('r2')
    }
    expect(await whoAnswers(url, 'prompts/get', { name: 'secret' })).toBe('r2')
    for (const name of ['Render_video', 'render_vide', 'transcode2', 'get_forecast']) {
      for (let i = 0; i < 3; i++)
        expect(['r0', 'r1']).toContain(await whoAnswers(url, 'tools/call', { name }))
    }
    for (let i = 0; i < 4; i++) expect(['r0', 'r1']).toContain(await whoAnswers(url, 'tools/list'))
    expect(r2.calls.map((c) => c.name).sort()).toEqual([
      'render_video',
      'render_video_4k',
      'secret',
      'transcode',
    ])
  })
})

describe('per-replica in-flight limit', () => {
  it('answers the request past maxInFlight with 503, Retry-After and its id, at once', async () => {
    const r = await startReplica('r0', (c) => (c.name === 'slow' ? { delayMs: 1500 } : 'ok'))
    const gw = await startTestGateway({ ...QUIET, ...poolConfig([r], { maxInFlight: 2 }) })
    const url = gw.mcpUrl('app')
    const slow = [1, 2].map((id) => mcpPost(url, 'tools/call', { name: 'slow' }, { id }))
    await waitUntil(() => r.inFlight === 2, 5000, 'two calls in flight')
    const t0 = performance.now()
    const over = await mcpPost(url, 'tools/call', { name: 'quick' }, { id: 'over-1' })
    const ms = performance.now() - t0
    expect(over.status).toBe(503)
    expect(over.headers['retry-after']).toBe('1')
    expect(over.headers['x-mcp-gateway-error']).toBe('overloaded')
    expect(over.json()).toMatchObject({
      id: 'over-1',
      error: { code: -31503, data: { source: 'gateway' } },
    })
    expect(ms).toBeLessThan(250) // no queueing behind the slow calls (generous for a shared machine)
    expect(r.count('tools/call')).toBe(2) // the refused call never reached the replica
    for (const res of await Promise.all(slow)) expect(res.status).toBe(200)
    expect((await mcpPost(url, 'tools/call', { name: 'quick' })).status).toBe(200)
  })
})
