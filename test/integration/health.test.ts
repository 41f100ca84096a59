import { describe, expect, it } from 'vitest'
import { mcpPost, rawRequest } from '../helpers/clients.js'
import { adminUrl, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import {
  poolConfig,
  runLoad,
  startReplicas,
  waitUntil,
  type MockReplica,
} from '../helpers/replicas.js'

const FAST_CHECKS = { intervalMs: 40, timeoutMs: 300, unhealthyAfter: 2, healthyAfter: 2 }

interface Readyz {
  readonly ready: boolean
  readonly upstreamsOut: { upstream: string; state: string; reason: string; until?: string }[]
}

async function readyz(gw: TestGateway): Promise<Readyz> {
  return (await rawRequest('GET', `${adminUrl(gw)}/readyz`)).json() as Readyz
}

async function outIds(gw: TestGateway): Promise<string[]> {
  return (await readyz(gw)).upstreamsOut.map((o) => o.upstream).sort()
}

async function waitOut(gw: TestGateway, ids: string[]): Promise<void> {
  await expect.poll(() => outIds(gw), { timeout: 5000 }).toEqual([...ids].sort())
}

function stateLogs(gw: TestGateway): Record<string, unknown>[] {
  return gw.logs.filter(
    (l) => l['msg'] === 'upstream out of rotation' || l['msg'] === 'upstream back in rotation',
  )
}

describe('active health checks (server/discover)', () => {
  it('take a failing replica out, say why, and put it back when it recovers', async () => {
    let failing = false
    const rs = await startReplicas(3, (c) =>
      c.method === 'server/discover' && c.replica === 'r0' && failing ? { status: 500 } : 'ok',
    )
    const gw = await startTestGateway(
      poolConfig(rs, { healthCheck: FAST_CHECKS, headers: { 'x-api-key': 'k1' } }),
    )
    await waitUntil(() => rs.every((r) => r.count('server/discover') >= 1), 5000, 'first checks')
    // The probe is a modern request with the server's static headers (SEP-2243 headers, envelope).
    const probe = rs[0]?.calls.find((c) => c.method === 'server/discover')
    expect(probe?.headers).toMatchObject({
      'mcp-method': 'server/discover',
      'mcp-protocol-version': '2026-07-28',
      'x-api-key': 'k1',
    })
    failing = true
    await waitOut(gw, ['app#0'])
    const ready = await readyz(gw)
    expect(ready.ready).toBe(true) // other replicas still serve: the gateway stays ready
    expect(ready.upstreamsOut[0]).toMatchObject({
      state: 'down',
      reason: 'health check failed: status 500',
    })
    expect(stateLogs(gw).at(-1)).toMatchObject({
      server: 'app',
      upstream: 'app#0',
      state: 'down',
      level: 40,
    })
    expect(
      await gw.metrics.registry.getSingleMetricAsString('mcp_edge_upstream_healthy'),
    ).toContain('upstream="app#0"} 0')
    const before = rs[0]?.count('tools/call') ?? 0
    await runLoad(30, 3, (i) => mcpPost(gw.mcpUrl('app'), 'tools/call', { name: `t${i}` }))
    expect(rs[0]?.count('tools/call')).toBe(before)

    failing = false
    await waitOut(gw, [])
    expect(stateLogs(gw).at(-1)).toMatchObject({ upstream: 'app#0', state: 'up' })
    await runLoad(60, 3, (i) => mcpPost(gw.mcpUrl('app'), 'tools/call', { name: `u${i}` }))
    expect(rs[0]?.count('tools/call')).toBeGreaterThan(before + 5) // it gets traffic again
  })

  it('answer 503 with Retry-After in under 50 ms when every replica is checked down, and recover', async () => {
    let down = false
    const rs = await startReplicas(3, (c) =>
      c.method === 'server/discover' && down ? { status: 503 } : 'ok',
    )
    const gw = await startTestGateway(poolConfig(rs, { healthCheck: FAST_CHECKS }))
    down = true
    await waitOut(gw, ['app#0', 'app#1', 'app#2'])
    const times: number[] = []
    for (let i = 0; i < 9; i++) {
      const t0 = performance.now()
      const res = await mcpPost(gw.mcpUrl('app'), 'tools/list', {}, { id: i })
      times.push(performance.now() - t0)
      expect(res.status).toBe(503)
      expect(res.headers['retry-after']).toBe('1')
      expect(res.json()).toMatchObject({
        id: i,
        error: { code: -31503, data: { reason: 'no_upstream' } },
      })
    }
    times.sort((a, b) => a - b)
    expect(times[4]).toBeLessThan(50) // median: no connect attempt, no wait
    expect(rs.reduce((n, r) => n + r.count('tools/list'), 0)).toBe(0)
    down = false
    await waitOut(gw, [])
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/list')).status).toBe(200)
  })
})

describe('passive ejection', () => {
  it('ejects a replica after consecutive failures for a growing period and readmits it', async () => {
    const rs = await startReplicas(3)
    const outlier = { consecutiveFailures: 3, baseEjectionMs: 300, maxEjectionMs: 5000 }
    const gw = await startTestGateway(poolConfig(rs, { outlier, balance: 'round-robin' }))
    const url = gw.mcpUrl('app')
    const r0 = rs[0] as MockReplica
    for (let round = 1; round <= 2; round++) {
      await r0.kill()
      // Refused connections are NotSent: every request still succeeds on another replica.
      for (let i = 0; i < 12; i++)
        expect((await mcpPost(url, 'tools/call', { name: 'x' })).status).toBe(200)
      const out = (await readyz(gw)).upstreamsOut
      expect(out).toEqual([expect.objectContaining({ upstream: 'app#0', state: 'ejected' })])
      expect(out[0]?.reason).toMatch(/^3 consecutive failures, last: upstream_unavailable/)
      expect(stateLogs(gw).at(-1)).toMatchObject({
        upstream: 'app#0',
        state: 'ejected',
        detail: expect.stringContaining(`out for ${300 * round} ms`),
      })
      await r0.restart()
      await waitOut(gw, [])
      expect(stateLogs(gw).at(-1)).toMatchObject({ upstream: 'app#0', state: 'readmitted' })
      const before = r0.count('tools/call')
      for (let i = 0; i < 6; i++) await mcpPost(url, 'tools/call', { name: 'y' })
      expect(r0.count('tools/call')).toBeGreaterThan(before)
    }
  })

  it('never ejects the last replica, and tries ejected ones when nothing else is left (panic)', async () => {
    const rs = await startReplicas(3)
    const gw = await startTestGateway(
      poolConfig(rs, { outlier: { consecutiveFailures: 2, baseEjectionMs: 60_000 } }),
    )
    const url = gw.mcpUrl('app')
    await Promise.all(rs.map((r) => r.kill()))
    for (let i = 0; i < 10; i++) {
      const res = await mcpPost(url, 'tools/list', {}, { id: i })
      // Every replica refused: nothing reached a backend, so it is a 503 to come back to.
      expect(res.status).toBe(503)
      expect(res.headers['retry-after']).toBe('1')
      expect(res.json()).toMatchObject({
        id: i,
        error: { code: -31503, data: { reason: 'no_upstream' } },
      })
    }
    const out = await outIds(gw)
    expect(out).toHaveLength(2)
    const kept = ['app#0', 'app#1', 'app#2'].find((id) => !out.includes(id)) as string
    // Bring back one of the ejected replicas only: the one never ejected still refuses, and the
    // ejected one is tried anyway rather than failing the request.
    const ejected = rs[Number(out[0]?.slice(-1))] as MockReplica
    await ejected.restart()
    expect((await mcpPost(url, 'tools/list')).status).toBe(200)
    expect(ejected.count('tools/list')).toBe(1)
    expect(kept).toBeDefined()
  })
})

describe('a replica killed under load', () => {
  it('fails no list or read, and fails tools/call only for calls in flight on it', async () => {
    const rs = await startReplicas(3, (c) => ({ delayMs: c.method === 'tools/call' ? 30 : 15 }))
    // A crash fails every request the replica holds at once; the retry budget has to cover that
    // burst (Envoy's default minimum of 3 concurrent retries would not, at this concurrency).
    const gw = await startTestGateway(poolConfig(rs, { retry: { minConcurrent: 12 } }))
    const url = gw.mcpUrl('app')
    const victim = rs[1] as MockReplica
    const methods = ['tools/list', 'resources/read', 'tools/call'] as const
    const results = await runLoad(300, 12, async (i) => {
      if (i === 120) {
        void victim.kill()
      }
      const method = methods[i % 3] as (typeof methods)[number]
      const params = method === 'resources/read' ? { uri: `docs://${i}` } : { name: `call-${i}` }
      const res = await mcpPost(url, method, params, { id: i })
      return { i, method, status: res.status }
    })
    const failed = results.filter((r) => r.status !== 200)
    expect(failed.filter((r) => r.method !== 'tools/call')).toEqual([])
    // Each failed call was on its way to (or inside) the victim when it died: the access log says
    // which replica the gateway had sent it to. At most the 12 requests in flight can be affected.
    const sentTo = new Map(
      gw.logs.filter((l) => l['msg'] === 'request').map((l) => [l['name'], l['upstream']]),
    )
    for (const f of failed) expect(sentTo.get(`call-${f.i}`), `call ${f.i}`).toBe('app#1')
    expect(failed.length).toBeLessThanOrEqual(12)
    // Exactly once: no tools/call id reached two replicas.
    const ids = rs.flatMap((r) => r.calls.filter((c) => c.method === 'tools/call').map((c) => c.id))
    expect(new Set(ids).size).toBe(ids.length)
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThan(280)
  })
})
