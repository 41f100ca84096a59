import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startPagedMember, type RecordingMember } from '../helpers/regression-members.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

// One request makes bounded work elsewhere (docs/security.md): the member list reads a request to
// a virtual server causes are done by that request's one fan-out deadline, a routing refresh is
// single flight and throttled whatever it achieved, and every member read counts against the
// caller's limits on that member (docs/virtual-servers.md "Rate limits").

const tools = (n: number, prefix = 't'): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}${i}`)

const listReads = (m: RecordingMember): number =>
  m.seen.filter((s) => s.method === 'tools/list').length

const calls = (m: RecordingMember): number => m.seen.filter((s) => s.method === 'tools/call').length

/** A URL nothing listens on: a member that is down. */
async function downUrl(): Promise<string> {
  const port = await new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port: p } = s.address() as { port: number }
      s.close(() => resolve(p))
    })
  })
  return `http://127.0.0.1:${port}/mcp`
}

function policyDir(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-virtual-bounds-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), text)
  return dir
}

/** A tools/call of `name` through `url`: the in-band unknown-tool answer is expected. */
async function expectUnknown(url: string, name: string, id: string | number) {
  const res = await mcpPost(url, 'tools/call', { name, arguments: {} }, { id })
  expect(res.status).toBe(200)
  expect(res.response()).toMatchObject({
    id,
    error: { code: -32602, message: `Unknown tool: ${name}` },
  })
}

describe('unknown names on a virtual server: the routing refresh', () => {
  it('is single flight: 15 concurrent unknown names cause one refresh, not fifteen', async () => {
    // Slow pages, so every call arrives while the first refresh is under way.
    const docs = await closing(startPagedMember(tools(3), 1, { pageDelayMs: 150 }))
    const other = await closing(startPagedMember(['other'], 1))
    const gw = await startTestGateway({
      servers: {
        docs: { upstreams: [{ url: docs.url }] },
        other: { upstreams: [{ url: other.url }] },
      },
      virtualServers: { ws: { members: ['docs', 'other'], fanOutTimeoutMs: 5000 } },
    })
    const url = gw.mcpUrl('ws')
    await Promise.all(
      Array.from({ length: 15 }, (_, i) => expectUnknown(url, `nope_${i}`, `u${i}`)),
    )
    // One refresh: the first page of each member and the two later pages of docs, once.
    expect(listReads(docs)).toBe(3)
    expect(listReads(other)).toBe(1)
    expect(calls(docs) + calls(other)).toBe(0)
  })

  it('is throttled after a partial refresh (a member down): repeated misses reach no member', async () => {
    const docs = await closing(startPagedMember(tools(2), 2))
    const gw = await startTestGateway({
      servers: {
        docs: { upstreams: [{ url: docs.url }] },
        down: { upstreams: [{ url: await downUrl() }] },
      },
      // fanOutTimeoutMs: 500 → a refresh may follow the last one's end after 1 s.
      virtualServers: { ws: { members: ['docs', 'down'], fanOutTimeoutMs: 500 } },
    })
    const url = gw.mcpUrl('ws')
    await expectUnknown(url, 'nope', 1)
    expect(listReads(docs)).toBe(1)
    for (let i = 0; i < 8; i++) await expectUnknown(url, `nope_${i}`, `again${i}`)
    // Never fresh (a member is down), but throttled: nothing was sent to any member.
    expect(listReads(docs)).toBe(1)
    expect(calls(docs)).toBe(0)
    // A throttle, not a stop: once it has passed, a miss reads the lists again (and a known
    // name needs no refresh at all).
    await expect
      .poll(
        async () => {
          await expectUnknown(url, 'later', 'later')
          return listReads(docs)
        },
        { timeout: 5000, interval: 200 },
      )
      .toBe(2)
    const known = await mcpPost(url, 'tools/call', { name: 't1', arguments: {} }, { id: 'k' })
    expect(known.response()).toMatchObject({ id: 'k', result: { content: [{ text: 'ran t1' }] } })
    expect(listReads(docs)).toBe(2)
  })

  it('is throttled after a refresh that cannot finish (a member with more than 10 pages)', async () => {
    const big = await closing(startPagedMember(tools(14), 1))
    const gw = await startTestGateway({
      servers: { big: { upstreams: [{ url: big.url }] } },
      virtualServers: { ws: { members: ['big'], fanOutTimeoutMs: 5000 } },
    })
    const url = gw.mcpUrl('ws')
    await expectUnknown(url, 'nope', 1)
    // The first page and at most 10 more.
    expect(listReads(big)).toBe(11)
    for (let i = 0; i < 5; i++) await expectUnknown(url, `nope_${i}`, i)
    expect(listReads(big)).toBe(11)
  })
})

describe('every named call is bounded the same way', () => {
  it('resources/read and prompts/get of unknown targets: one refresh per kind, then throttled', async () => {
    const docs = await closing(startSdkServer({ name: 'docs' }))
    const gw = await startTestGateway({
      servers: {
        docs: { upstreams: [{ url: docs.url }] },
        down: { upstreams: [{ url: await downUrl() }] },
      },
      virtualServers: { ws: { members: ['docs', 'down'], fanOutTimeoutMs: 5000 } },
    })
    const url = gw.mcpUrl('ws')
    const reads = (method: string) => docs.calls(method).length
    const read = async (i: number) => {
      const uri = `nope://${i}`
      const res = await mcpPost(url, 'resources/read', { uri }, { id: i })
      expect(res.response()).toMatchObject({
        id: i,
        error: { code: -32602, message: `Resource not found: ${uri}`, data: { uri } },
      })
    }
    const prompt = async (i: number) => {
      const res = await mcpPost(url, 'prompts/get', { name: `nope_${i}` }, { id: i })
      expect(res.response()).toMatchObject({
        id: i,
        error: { code: -32602, message: `Unknown prompt: nope_${i}` },
      })
    }
    await Promise.all(Array.from({ length: 10 }, (_, i) => read(i)))
    await Promise.all(Array.from({ length: 10 }, (_, i) => prompt(i)))
    const once = {
      'resources/list': 1,
      'resources/templates/list': 1,
      'prompts/list': 1,
    }
    for (const [method, n] of Object.entries(once)) expect(reads(method)).toBe(n)
    // A member is down: never fresh, but throttled.
    for (let i = 10; i < 15; i++) await read(i)
    for (let i = 10; i < 15; i++) await prompt(i)
    for (const [method, n] of Object.entries(once)) expect(reads(method)).toBe(n)
    expect(reads('resources/read') + reads('prompts/get')).toBe(0)
  })
})

describe("the request's one fan-out deadline", () => {
  /** A member with 20 pages of one tool, each page 100 ms late; fanOutTimeoutMs: 300. */
  async function slowPaged() {
    const slow = await closing(startPagedMember(tools(20), 1, { pageDelayMs: 100 }))
    const gw = await startTestGateway({
      servers: { slow: { upstreams: [{ url: slow.url }] } },
      virtualServers: { ws: { members: ['slow'], fanOutTimeoutMs: 300 } },
    })
    return { slow, url: gw.mcpUrl('ws') }
  }

  it('bounds the whole refresh of an unknown name, every page of it', async () => {
    const { slow, url } = await slowPaged()
    const started = performance.now()
    await expectUnknown(url, 'nope', 'd1')
    const took = performance.now() - started
    // 300 ms for every page together (it was 300 ms per page: eleven pages, over a second).
    expect(took).toBeLessThan(1000)
    expect(listReads(slow)).toBeLessThanOrEqual(4)
    // Nothing is still being read after the answer.
    const after = listReads(slow)
    await new Promise((resolve) => setTimeout(resolve, 400))
    expect(listReads(slow)).toBe(after)
  })

  it("bounds a tools/list's name-learning pass by the list's own deadline", async () => {
    const { slow, url } = await slowPaged()
    const started = performance.now()
    const res = await mcpPost(url, 'tools/list', {}, { id: 'l1' })
    const took = performance.now() - started
    expect(res.status).toBe(200)
    const result = res.response().result as { tools: { name: string }[]; nextCursor?: string }
    expect(result.tools.map((t) => t.name)).toEqual(['t0'])
    expect(typeof result.nextCursor).toBe('string')
    expect(took).toBeLessThan(1000)
    expect(listReads(slow)).toBeLessThanOrEqual(4)
  })
})

describe("member list reads count against the caller's limits on the member", () => {
  const POLICY = `
rules:
  - { name: all, servers: ["*"], allow: { tools: ["*"] } }
limits:
  - name: docs-lists
    servers: [docs]
    methods: [tools/list]
    key: header:x-user
    rate: 1/hour
`

  it("a refresh an unknown name causes spends the caller's quota, not another caller's", async () => {
    const docs = await closing(startPagedMember(tools(2), 2))
    const other = await closing(startPagedMember(['other'], 1))
    const gw = await startTestGateway(
      {
        policies: '.',
        servers: {
          docs: { upstreams: [{ url: docs.url }] },
          other: { upstreams: [{ url: other.url }] },
        },
        virtualServers: { ws: { members: ['docs', 'other'] } },
      },
      { dir: policyDir(POLICY) },
    )
    const as = (user: string) => ({ headers: { 'x-user': user } })
    const miss = await mcpPost(
      gw.mcpUrl('ws'),
      'tools/call',
      { name: 'nope', arguments: {} },
      { id: 'm', ...as('u1') },
    )
    expect(miss.response()).toMatchObject({ id: 'm', error: { code: -32602 } })
    expect(listReads(docs)).toBe(1)
    // The refresh was u1's request to docs: u1's one list an hour is spent, on docs' own
    // endpoint too; u2's is not.
    const direct = await mcpPost(gw.mcpUrl('docs'), 'tools/list', {}, { id: 'd', ...as('u1') })
    expect(direct.status).toBe(429)
    expect(direct.response()).toMatchObject({
      id: 'd',
      error: { data: { reason: 'rate_limited', limit: 'docs-lists' } },
    })
    expect(listReads(docs)).toBe(1)
    const bystander = await mcpPost(gw.mcpUrl('docs'), 'tools/list', {}, { id: 'b', ...as('u2') })
    expect(bystander.status).toBe(200)
    expect(listReads(docs)).toBe(2)
  })

  it('a merged list counts before any cache: refused members are left out, all refused is 429', async () => {
    const hints = { 'tools/list': { ttlMs: 60_000, cacheScope: 'public' as const } }
    const docs = await closing(startSdkServer({ name: 'docs', cacheHints: hints }))
    const other = await closing(startPagedMember(['other'], 1))
    const gw = await startTestGateway(
      {
        cache: {},
        policies: '.',
        servers: {
          docs: { upstreams: [{ url: docs.url }] },
          other: { upstreams: [{ url: other.url }] },
        },
        virtualServers: {
          ws: { members: ['docs', 'other'], prefix: 'always' },
          solo: { members: ['docs'] },
        },
      },
      { dir: policyDir(POLICY) },
    )
    const list = (server: string, id: string, user: string) =>
      mcpPost(gw.mcpUrl(server), 'tools/list', {}, { id, headers: { 'x-user': user } })
    const names = (res: Awaited<ReturnType<typeof list>>) =>
      (res.response().result as { tools: { name: string }[] }).tools.map((t) => t.name)
    const first = await list('ws', 'a', 'u1')
    expect(first.status).toBe(200)
    expect(names(first)).toContain('docs_get_forecast')
    expect(docs.calls('tools/list')).toHaveLength(1)
    // u1's quota on docs is spent: the merged answer in the cache is not served to it, docs is
    // left out (partial), and docs sees nothing.
    const second = await list('ws', 'b', 'u1')
    expect(second.status).toBe(200)
    expect(names(second)).toEqual(['other_other'])
    expect(String(second.headers['ratelimit'])).toContain('"docs-lists";r=0')
    expect(docs.calls('tools/list')).toHaveLength(1)
    // Through a virtual server whose every member refuses: 429, as on docs' own endpoint.
    const solo = await list('solo', 'c', 'u1')
    expect(solo.status).toBe(429)
    expect(solo.headers['retry-after']).toBeDefined()
    expect(solo.response()).toMatchObject({
      id: 'c',
      error: { data: { source: 'gateway', reason: 'rate_limited', limit: 'docs-lists' } },
    })
    expect(docs.calls('tools/list')).toHaveLength(1)
    // Another caller is served (its own quota), the edge cache answering for docs.
    const bystander = await list('ws', 'd', 'u2')
    expect(names(bystander)).toContain('docs_get_forecast')
  })
})
