import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { RunningGateway } from '../../src/server.js'
import { HAVE_REDIS, IN_CI, MISSING_REDIS, startRedis, type TestRedis } from '../helpers/cache.js'
import { mcpPost, type RawResponse } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

/**
 * State keyed by what a client chooses cannot push out everyone else's (docs/rate-limits.md
 * §Memory): key values are held as fixed-size digests, each limit has its own bounded table, and
 * a bucket that is not idle is never dropped to make room. A table full of busy buckets refuses
 * new keys (429 rate_limit_table_full), in memory and in Redis alike.
 */

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/app`
/** The size of value that filled the old shared LRU (16 MiB counted by key length). */
const HUGE = 14 * 1024

const POLICY = `
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }
limits:
  - name: per-tenant-lists
    servers: [app]
    methods: [tools/list]
    key: header:X-Tenant
    rate: 1000/hour
  - name: per-user-forecasts
    servers: [app]
    tools: [get_forecast]
    key: claim:sub
    rate: 2/hour
  - name: per-tenant-slow
    servers: [app]
    tools: [slow_forecast]
    key: header:X-Tenant
    concurrency: 1
`

interface Setup {
  readonly server: SdkTestServer
  readonly gw: TestGateway
  readonly url: string
  token(sub: string): Promise<string>
}

async function setup(rateLimits: Record<string, unknown> = {}): Promise<Setup> {
  const key = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const server = await closing(startSdkServer())
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-limit-tables-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  const gw = await startTestGateway(
    {
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      policies: '.',
      rateLimits,
      servers: { app: { upstreams: [{ url: server.url }] } },
    },
    { dir },
  )
  return {
    server,
    gw,
    url: gw.mcpUrl('app'),
    token: (sub) => mintToken(claimsFor(ISS, AUD, { sub }), { key }),
  }
}

function forecast(s: Setup, auth: string, id: number): Promise<RawResponse> {
  return mcpPost(
    s.url,
    'tools/call',
    { name: 'get_forecast', arguments: { city: 'Oslo' } },
    {
      auth,
      id,
    },
  )
}

/** `tools/list` with a tenant header of `HUGE` characters, distinct per `i`. */
function hugeTenantList(s: Setup, auth: string, i: number): Promise<RawResponse> {
  const tenant = `${String(i).padStart(6, '0')}${'t'.repeat(HUGE)}`
  return mcpPost(s.url, 'tools/list', {}, { auth, id: 10_000 + i, headers: { 'x-tenant': tenant } })
}

/** Sends `count` requests, `parallel` at a time; returns the statuses in order. */
async function flood(
  count: number,
  send: (i: number) => Promise<RawResponse>,
  parallel = 8,
): Promise<RawResponse[]> {
  const out: RawResponse[] = []
  for (let i = 0; i < count; i += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - i) }, (_, j) => send(i + j))
    out.push(...(await Promise.all(batch)))
  }
  return out
}

function expectRefused(res: RawResponse, id: number, reason: string): void {
  expect(res.status).toBe(429)
  expect(res.headers['x-mcp-gateway-error']).toBe(reason)
  expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1)
  expect(res.json()).toMatchObject({
    jsonrpc: '2.0',
    id,
    error: { code: -31029, data: { source: 'gateway', reason } },
  })
}

async function tableFullCount(gw: RunningGateway, limit: string): Promise<number> {
  const metric = await gw.metrics.rateLimitTableFull.get()
  return metric.values.find((v) => v.labels.limit === limit)?.value ?? 0
}

/**
 * The attack: bob and mallory have spent their `claim:sub` burst; mallory then sends 620
 * `tools/list` with distinct 14 KB `X-Tenant` values (a limit keyed on a header she chooses).
 * Neither may get a fresh burst out of it, and the backend sees no call past the limit.
 */
async function floodDoesNotForgive(s: Setup): Promise<void> {
  const bob = await s.token('bob')
  const mallory = await s.token('mallory')
  for (const [who, base] of [
    [bob, 100],
    [mallory, 200],
  ] as const) {
    expect((await forecast(s, who, base)).status).toBe(200)
    expect((await forecast(s, who, base + 1)).status).toBe(200)
    expectRefused(await forecast(s, who, base + 2), base + 2, 'rate_limited')
  }
  const calls = s.server.calls('tools/call').length
  expect(calls).toBe(4)
  const lists = await flood(620, (i) => hugeTenantList(s, mallory, i))
  expect(lists.every((r) => r.status === 200)).toBe(true)
  expect(s.server.calls('tools/list')).toHaveLength(620)
  expectRefused(await forecast(s, bob, 103), 103, 'rate_limited')
  expectRefused(await forecast(s, mallory, 203), 203, 'rate_limited')
  expect(s.server.calls('tools/call')).toHaveLength(calls)
}

/**
 * Each limit's table holds its share of `memoryBytes` (5 buckets here): new tenants past it are
 * refused with their id, counted and audited, nothing reaches the backend, the tenants already in
 * keep their state, and another limit's table is untouched.
 */
async function overflowRefusesNewKeys(s: Setup): Promise<void> {
  const mallory = await s.token('mallory')
  const tenant = (i: number) => `tenant-${i}-${'v'.repeat(2000)}`
  const list = (i: number) =>
    mcpPost(s.url, 'tools/list', {}, { auth: mallory, id: i, headers: { 'x-tenant': tenant(i) } })
  const first = await flood(5, list)
  expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
  const rest = await flood(15, (i) => list(5 + i))
  rest.forEach((r, i) => expectRefused(r, 5 + i, 'rate_limit_table_full'))
  expect(s.server.calls('tools/list')).toHaveLength(5)
  expect(await tableFullCount(s.gw, 'per-tenant-lists')).toBe(15)
  // The five tenants in the table keep their buckets (and their room).
  expect((await list(0)).status).toBe(200)
  expect(s.server.calls('tools/list')).toHaveLength(6)
  // Another limit keeps its own table: a first-time caller of get_forecast is served.
  expect((await forecast(s, await s.token('carol'), 1)).status).toBe(200)
  // Audited with the key's kind and the reason, never the value.
  const audits = s.gw.logs.filter((l) => l['audit'] === true && l['limit'] === 'per-tenant-lists')
  expect(audits).toHaveLength(15)
  expect(audits[0]).toMatchObject({
    decision: 'rate_limited',
    reason: 'rate_limit_table_full',
    key: 'header:x-tenant',
  })
  expect(JSON.stringify(s.gw.logs)).not.toContain('tenant-7-')
}

describe('rate-limit state keyed by client choices (in memory)', () => {
  it("a flood of huge header values on one limit gives nobody's claim:sub bucket a fresh burst", async () => {
    await floodDoesNotForgive(await setup())
  })

  it('a full table refuses new keys with 429 rate_limit_table_full instead of forgetting old ones', async () => {
    // 2 rate limits and 1 concurrency limit share 3 x 5 buckets of 128 bytes.
    await overflowRefusesNewKeys(await setup({ memoryBytes: 3 * 5 * 128 }))
  })

  it('a concurrency table full of held slots refuses a new key; a slot given back makes room', async () => {
    const s = await setup({ memoryBytes: 3 * 1 * 128 })
    const auth = await s.token('mallory')
    const slow = (tenant: string, id: number) =>
      mcpPost(
        s.url,
        'tools/call',
        { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 4 } },
        { auth, id, headers: { 'x-tenant': tenant } },
      )
    const held = slow('a', 1)
    await expect.poll(() => s.server.calls('tools/call').length).toBe(1)
    expectRefused(await slow('b', 2), 2, 'rate_limit_table_full')
    expect(s.server.calls('tools/call')).toHaveLength(1)
    expect(await tableFullCount(s.gw, 'per-tenant-slow')).toBe(1)
    expect((await held).status).toBe(200)
    const next = await mcpPost(
      s.url,
      'tools/call',
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 1 } },
      { auth, id: 3, headers: { 'x-tenant': 'b' } },
    )
    expect(next.status).toBe(200)
  })
})

describe.skipIf(!HAVE_REDIS && !IN_CI)('rate-limit state keyed by client choices (Redis)', () => {
  if (!HAVE_REDIS) it('needs redis-server', () => expect.fail(MISSING_REDIS))

  async function redisSetup(memoryBytes?: number): Promise<{ s: Setup; redis: TestRedis }> {
    const redis = await startRedis()
    // Redis decides every call here, also on a loaded machine: a command that timed out would be
    // decided locally (the fallback, tested in test/integration/rate-limits-redis.test.ts).
    const s = await setup({
      redis: redis.url,
      commandTimeoutMs: 2000,
      ...(memoryBytes !== undefined && { memoryBytes }),
    })
    await expect
      .poll(() =>
        s.gw.logs.some((l) => String(l['msg']).startsWith('rate limits: redis connected')),
      )
      .toBe(true)
    return { s, redis }
  }

  /** Every key the limits wrote: one per limit, fixed-size members, no key value in the clear. */
  async function expectFixedSizeState(redis: TestRedis, capacity: number): Promise<void> {
    const keys = await redis.client.keys('*')
    expect(keys.length).toBeGreaterThan(0)
    for (const key of keys) {
      expect(key).toMatch(/^mcp-edge:rl2:[A-Za-z0-9._-]{1,64}#[0-9a-f]{12}$/)
      expect(await redis.client.type(key)).toBe('zset')
      const members = await redis.client.zrange(key, 0, -1)
      expect(members.length).toBeLessThanOrEqual(capacity)
      for (const m of members) expect(m).toMatch(/^[A-Za-z0-9_-]{43}$/)
    }
  }

  it("a flood of huge header values gives nobody's bucket a fresh burst, even in an evicting Redis", async () => {
    const { s, redis } = await redisSetup()
    // A Redis that evicts under memory pressure: 620 keys of 14 KB would push out live buckets.
    await redis.client.config('SET', 'maxmemory', '4mb')
    await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru')
    await redis.client.config('SET', 'maxmemory-samples', '10')
    await floodDoesNotForgive(s)
    expect(Number((await redis.client.info('stats')).match(/evicted_keys:(\d+)/)?.[1])).toBe(0)
    await expectFixedSizeState(redis, s.gw.ref.current.limitState.capacityFor(3))
  })

  it('a full table in Redis refuses new keys with 429 rate_limit_table_full', async () => {
    const { s, redis } = await redisSetup(3 * 5 * 128)
    await overflowRefusesNewKeys(s)
    await expectFixedSizeState(redis, 5)
    // Decided by Redis, not by the local fallback.
    expect((await s.gw.metrics.rateLimitFallbacks.get()).values[0]?.value ?? 0).toBe(0)
  })
})
