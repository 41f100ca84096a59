import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectClient, connectLegacyClient, mcpPost } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

const ALLOW_ALL = `
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }
`

function policyDir(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-limits-it-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), ALLOW_ALL + text)
  return dir
}

async function setup(limits: string, extra: Record<string, unknown> = {}) {
  const server = await closing(startSdkServer())
  const gw = await startTestGateway(
    { ...oneServer(server.url), policies: '.', ...extra },
    { dir: policyDir(limits) },
  )
  return { server, gw, url: gw.mcpUrl('app') }
}

describe('rate limits', () => {
  it('answers 429 with Retry-After, RateLimit fields and the id; the backend sees nothing', async () => {
    const { server, gw, url } = await setup(`
limits:
  - name: calls
    servers: [app]
    tools: ["get_*"]
    key: none
    rate: 2/minute
    burst: 2
`)
    const ok1 = await mcpPost(url, 'tools/call', {
      name: 'get_forecast',
      arguments: { city: 'Oslo' },
    })
    expect(ok1.status).toBe(200)
    expect(ok1.headers['ratelimit-policy']).toBe('"calls";q=2;w=60')
    expect(ok1.headers['ratelimit']).toBe('"calls";r=1;t=0')
    const ok2 = await mcpPost(url, 'tools/call', {
      name: 'get_alerts',
      arguments: { city: 'Oslo' },
    })
    expect(ok2.status).toBe(200)
    expect(ok2.headers['ratelimit']).toBe('"calls";r=0;t=60')
    const seen = server.calls('tools/call').length
    const refused = await mcpPost(
      url,
      'tools/call',
      { name: 'get_forecast', arguments: { city: 'Oslo' } },
      { id: 'req-77' },
    )
    expect(refused.status).toBe(429)
    expect(refused.headers['retry-after']).toBe('30')
    expect(refused.headers['ratelimit-policy']).toBe('"calls";q=2;w=60')
    expect(refused.headers['ratelimit']).toBe('"calls";r=0;t=30')
    expect(refused.headers['x-mcp-gateway-error']).toBe('rate_limited')
    const body = refused.json() as {
      id: unknown
      error: { code: number; data: Record<string, unknown> }
    }
    expect(body.id).toBe('req-77')
    expect(body.error.code).toBe(-31029)
    expect(body.error.data).toMatchObject({
      source: 'gateway',
      reason: 'rate_limited',
      limit: 'calls',
    })
    expect(server.calls('tools/call')).toHaveLength(seen)
    // Other tools are not counted.
    const other = await mcpPost(url, 'tools/call', { name: 'whoami', arguments: {} })
    expect(other.status).toBe(200)
    expect(other.headers['ratelimit']).toBeUndefined()
    // Audit line and metric per limit name.
    expect(
      gw.logs.some((l) => l.audit === true && l.decision === 'rate_limited' && l.limit === 'calls'),
    ).toBe(true)
    const metrics = await gw.metrics.registry.getSingleMetricAsString('mcp_edge_rate_limited_total')
    expect(metrics).toContain('mcp_edge_rate_limited_total{limit="calls"} 1')
  })

  it('exposes the RateLimit fields to browser clients (CORS)', async () => {
    const { url } = await setup(
      `
limits:
  - name: browser
    servers: [app]
    tools: ["*"]
    key: none
    rate: 5/second
`,
      { origins: ['https://app.example'] },
    )
    const res = await mcpPost(
      url,
      'tools/call',
      { name: 'whoami', arguments: {} },
      { headers: { origin: 'https://app.example' } },
    )
    expect(res.status).toBe(200)
    expect(res.headers['ratelimit']).toBe('"browser";r=4;t=0')
    const exposed = String(res.headers['access-control-expose-headers']).split(/,\s*/)
    expect(exposed).toEqual(
      expect.arrayContaining(['ratelimit', 'ratelimit-policy', 'retry-after']),
    )
  })

  it('keys on a header: one caller over its limit leaves another untouched', async () => {
    const { server, url } = await setup(`
limits:
  - name: per-key
    servers: ["*"]
    methods: ["*"]
    key: header:X-Api-Key
    rate: 1/hour
    burst: 1
`)
    const call = (key: string, id: number) =>
      mcpPost(url, 'tools/list', {}, { id, headers: { 'x-api-key': key } })
    expect((await call('a', 1)).status).toBe(200)
    const before = server.requests.length
    const refused = await call('a', 2)
    expect(refused.status).toBe(429)
    expect(refused.response().id).toBe(2)
    expect(server.requests).toHaveLength(before)
    expect((await call('b', 3)).status).toBe(200)
    // Without the header a caller shares the "missing" bucket, never a fresh one per request.
    expect((await mcpPost(url, 'tools/list', {}, { id: 4 })).status).toBe(200)
    expect((await mcpPost(url, 'tools/list', {}, { id: 5 })).status).toBe(429)
  })

  it('counts cache hits toward limits naming their method', async () => {
    const server = await closing(
      startSdkServer({ cacheHints: { 'tools/list': { ttlMs: 60_000, cacheScope: 'public' } } }),
    )
    const gw = await startTestGateway(
      { ...oneServer(server.url), policies: '.', cache: {} },
      {
        dir: policyDir(`
limits:
  - name: lists
    servers: [app]
    methods: [tools/list]
    key: none
    rate: 2/hour
`),
      },
    )
    const url = gw.mcpUrl('app')
    // Until its listen is acknowledged, an answer in flight may predate a change and is not stored.
    await expect.poll(() => gw.cache?.invalidator.isConnected('app')).toBe(true)
    expect((await mcpPost(url, 'tools/list', {}, { id: 1 })).status).toBe(200)
    expect((await mcpPost(url, 'tools/list', {}, { id: 2 })).status).toBe(200)
    expect(server.calls('tools/list')).toHaveLength(1) // the second one was a hit
    const third = await mcpPost(url, 'tools/list', {}, { id: 3 })
    expect(third.status).toBe(429)
    expect(third.response().id).toBe(3)
  })

  it('the official client surfaces the 429 as an error', async () => {
    const { url } = await setup(`
limits:
  - name: tight
    servers: [app]
    tools: ["*"]
    key: ip
    rate: 1/hour
`)
    const client = await closing(connectClient(url))
    await client.callTool({ name: 'whoami', arguments: {} })
    const err = await client.callTool({ name: 'whoami', arguments: {} }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(Error)
    expect(String((err as Error).message)).toMatch(/429|Rate limit exceeded/)
  })

  it('the 2025-era SDK v1 client is limited alike and surfaces the 429', async () => {
    const { server, url } = await setup(`
limits:
  - name: legacy-calls
    servers: [app]
    tools: [whoami]
    key: ip
    rate: 1/hour
`)
    const client = await closing(connectLegacyClient(url))
    await client.callTool({ name: 'whoami', arguments: {} })
    const seen = server.calls('tools/call').length
    const err = await client.callTool({ name: 'whoami', arguments: {} }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(Error)
    expect(String((err as Error).message)).toMatch(/429|Rate limit exceeded/)
    expect(server.calls('tools/call')).toHaveLength(seen)
  })

  it('a concurrency limit holds slow calls per key and frees each slot when its call ends', async () => {
    const { server, url } = await setup(`
limits:
  - name: slow
    servers: [app]
    tools: [slow_forecast]
    key: header:X-User
    concurrency: 2
`)
    const slow = (user: string, id: number) =>
      mcpPost(
        url,
        'tools/call',
        { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 3 } },
        { id, headers: { 'x-user': user } },
      )
    const first = [slow('a', 1), slow('a', 2)]
    await expect.poll(() => server.calls('tools/call').length).toBe(2)
    const third = await slow('a', 3)
    expect(third.status).toBe(429)
    expect(third.response().id).toBe(3)
    expect(server.calls('tools/call')).toHaveLength(2)
    // Another caller is not held back by a's calls.
    const other = await slow('b', 4)
    expect(other.status).toBe(200)
    for (const r of await Promise.all(first)) expect(r.status).toBe(200)
    // Both slots are free again.
    const again = await Promise.all([slow('a', 5), slow('a', 6)])
    expect(again.map((r) => r.status)).toEqual([200, 200])
  })
})
