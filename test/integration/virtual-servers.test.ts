import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import { forecastFor, startWeatherServer } from '../../deploy/demo/weather-server.js'
import { connectClient, mcpPost, rawRequest } from '../helpers/clients.js'
import { adminUrl, startTestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startNonValidatingBackend, startSdkServer } from '../helpers/sdk-servers.js'

/** The gateway's identity as its package.json gives it (name and version). */
const PACKAGE = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
) as {
  name: string
  version: string
}

/** Three official-SDK servers: weather and docs (the demo's) and a paginating "tickets". */
async function members(opts: Parameters<typeof startSdkServer>[0] = {}) {
  const weather = await closing(startWeatherServer())
  const docs = await closing(startDocsServer())
  const tickets = await closing(startSdkServer({ name: 'tickets', toolsPageSize: 2, ...opts }))
  return { weather, docs, tickets }
}

function servers(m: Awaited<ReturnType<typeof members>>): Record<string, unknown> {
  return {
    weather: { upstreams: [{ url: m.weather.url }] },
    docs: { upstreams: [{ url: m.docs.url }] },
    tickets: { upstreams: [{ url: m.tickets.url }] },
  }
}

const WEATHER_TOOLS = [
  'get_forecast',
  'get_alerts',
  'slow_forecast',
  'confirm_action',
  'delete_station',
]

describe('a virtual server over three SDK servers, with the v2 client (auto)', () => {
  it('discovers, lists across members and pages, calls, reads, gets prompts, completes', async () => {
    const m = await members()
    const gw = await startTestGateway({
      servers: servers(m),
      virtualServers: {
        workspace: {
          members: ['weather', 'docs', 'tickets'],
          prefix: 'onCollision',
          resources: { 'docs://*': 'docs' },
        },
      },
    })
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    expect(client.getProtocolEra()).toBe('modern')
    const discovered = client.getDiscoverResult()
    expect(discovered).toMatchObject({ capabilities: { tools: {}, prompts: {}, resources: {} } })
    // the virtual server names itself where the v2 client reads a server's identity (spec
    // 2026-07-28 server/discover: `_meta` io.modelcontextprotocol/serverInfo), as a member does
    expect(client.getServerVersion()).toEqual({ name: 'mcp-edge', version: PACKAGE.version })
    const direct = await closing(connectClient(gw.mcpUrl('tickets')))
    expect(direct.getServerVersion()?.name).toBe('tickets')

    const { tools } = await client.listTools()
    const names = tools.map((t) => t.name).sort()
    expect(names).toEqual(
      [
        ...WEATHER_TOOLS.map((t) => `weather_${t}`),
        ...WEATHER_TOOLS.map((t) => `tickets_${t}`),
        'search_docs',
        'whoami',
      ].sort(),
    )
    // tickets served its tools in pages of two: the client walked the gateway's cursors.
    expect(m.tickets.calls('tools/list').length).toBeGreaterThanOrEqual(3)

    const result = await client.callTool({
      name: 'weather_get_forecast',
      arguments: { city: 'Oslo' },
    })
    expect(textOf(result)).toBe(forecastFor('Oslo'))
    const who = await client.callTool({ name: 'whoami', arguments: {} })
    expect(textOf(who)).toBe('tickets')

    const read = await client.readResource({ uri: 'docs://readme' })
    expect(read.contents[0]?.uri).toBe('docs://readme')
    expect(m.tickets.calls('resources/read')).toHaveLength(0)

    const prompts = await client.listPrompts()
    expect(prompts.prompts.map((p) => p.name).sort()).toEqual(
      ['docs_review', 'docs_summarize', 'tickets_review', 'tickets_summarize'].sort(),
    )
    const prompt = await client.getPrompt({ name: 'tickets_review', arguments: { page: 'intro' } })
    expect(prompt.messages.length).toBeGreaterThan(0)
    expect(m.tickets.calls('prompts/get')[0]?.header('mcp-name')).toBe('review')

    const completion = await client.complete({
      ref: { type: 'ref/prompt', name: 'docs_review' },
      argument: { name: 'page', value: '' },
    })
    expect(Array.isArray(completion.completion.values)).toBe(true)
  })
})

/** tools/list through the gateway with raw requests, every page; names sorted, the first result. */
async function toolNames(url: string) {
  const names: string[] = []
  let first: ToolsPage | undefined
  let cursor: string | undefined
  for (let i = 0; i < 10; i++) {
    const res = await mcpPost(url, 'tools/list', cursor === undefined ? {} : { cursor })
    expect(res.status).toBe(200)
    const page = res.response().result as unknown as ToolsPage
    first ??= page
    names.push(...page.tools.map((t) => t.name))
    cursor = page.nextCursor
    if (cursor === undefined) break
  }
  return { names: names.sort(), result: first as ToolsPage }
}

interface ToolsPage {
  readonly tools: { name: string }[]
  readonly ttlMs: number
  readonly cacheScope: string
  readonly nextCursor?: string
}

describe('names across members', () => {
  async function setup(prefix: string) {
    const m = await members()
    const gw = await startTestGateway({
      servers: servers(m),
      virtualServers: { ws: { members: ['weather', 'tickets'], prefix } },
    })
    return { m, gw }
  }

  it('prefix: always prefixes every name', async () => {
    const { gw } = await setup('always')
    const { names } = await toolNames(gw.mcpUrl('ws'))
    expect(names).toEqual(
      [
        ...WEATHER_TOOLS.map((t) => `weather_${t}`),
        ...WEATHER_TOOLS.map((t) => `tickets_${t}`),
        'tickets_whoami',
      ].sort(),
    )
  })

  it('prefix: onCollision prefixes only colliding names, and both stay reachable', async () => {
    const { m, gw } = await setup('onCollision')
    const { names } = await toolNames(gw.mcpUrl('ws'))
    expect(names).toContain('whoami')
    expect(names).toContain('weather_get_forecast')
    expect(names).toContain('tickets_get_forecast')
    expect(names).not.toContain('get_forecast')
    const res = await mcpPost(gw.mcpUrl('ws'), 'tools/call', {
      name: 'tickets_get_forecast',
      arguments: { city: 'Oslo' },
    })
    expect(res.response().result).toBeDefined()
    const seen = m.tickets.calls('tools/call')[0]
    expect(seen?.header('mcp-name')).toBe('get_forecast')
    expect((seen?.json() as { params: { name: string } }).params.name).toBe('get_forecast')
    expect(
      gw.logs.some(
        (l) =>
          l.msg === 'virtual server: name collision; each is reachable by its prefixed name only',
      ),
    ).toBe(true)
  })

  it('prefix: never leaves a colliding name unreachable, logs it and shows it on /readyz', async () => {
    const { m, gw } = await setup('never')
    const { names } = await toolNames(gw.mcpUrl('ws'))
    expect(names).toEqual(['whoami'])
    const res = await mcpPost(
      gw.mcpUrl('ws'),
      'tools/call',
      { name: 'get_forecast', arguments: { city: 'Oslo' } },
      { id: 7 },
    )
    expect(res.status).toBe(200)
    expect(res.response()).toMatchObject({
      id: 7,
      error: { code: -32602, message: 'Unknown tool: get_forecast' },
    })
    expect(m.tickets.calls('tools/call')).toHaveLength(0)
    expect(gw.logs.some((l) => l.level === 50 && l.name === 'get_forecast')).toBe(true)
    const ready = (await rawRequest('GET', `${adminUrl(gw)}/readyz`)).json() as {
      ready: boolean
      warnings: string[]
    }
    expect(ready.ready).toBe(true)
    expect(ready.warnings.join('\n')).toContain(
      'virtualServers.ws: tools "get_forecast": served by weather, tickets under prefix: never',
    )
  })

  it('shortens the member part of a name past 63 characters, and the name part when it must', async () => {
    const long = 'a-member-with-a-rather-long-descriptive-name'
    const tool = 'summarise_the_quarterly_report'
    const huge = `x${'y'.repeat(61)}`
    const a = await closing(startNonValidatingBackend({ tools: [tool, huge] }))
    const b = await closing(startNonValidatingBackend({ tools: [tool, huge] }))
    const gw = await startTestGateway({
      servers: { [long]: { upstreams: [{ url: a.url }] }, b: { upstreams: [{ url: b.url }] } },
      virtualServers: { ws: { members: [long, 'b'], prefix: 'always' } },
    })
    const { names } = await toolNames(gw.mcpUrl('ws'))
    // Every tool is reachable: four names, none over 63 characters.
    expect(names).toHaveLength(4)
    expect(names).toContain(`b_${tool}`)
    for (const n of names) expect(n.length).toBeLessThanOrEqual(63)
    const shortened = names.find((n) => n !== `b_${tool}` && n.endsWith(`_${tool}`)) as string
    expect(shortened.startsWith('a-member')).toBe(true)
    // The shortened name routes to the member, with the tool's own name.
    const res = await mcpPost(gw.mcpUrl('ws'), 'tools/call', { name: shortened, arguments: {} })
    expect(res.response().result).toBeDefined()
    expect((a.calls('tools/call')[0]?.json() as { params: { name: string } }).params.name).toBe(
      tool,
    )
    // A name too long for even a hashed member part: its own name is shortened too, and the
    // call reaches the member under the whole own name.
    const hugeExposed = names.filter((n) => !n.endsWith(`_${tool}`))
    expect(hugeExposed).toHaveLength(2)
    expect(new Set(hugeExposed).size).toBe(2) // one per member
    const first = await mcpPost(gw.mcpUrl('ws'), 'tools/call', {
      name: hugeExposed[0],
      arguments: {},
    })
    expect(first.response().result).toBeDefined()
    const seen = [...a.calls('tools/call'), ...b.calls('tools/call')].map(
      (c) => (c.json() as { params: { name: string } }).params.name,
    )
    expect(seen).toContain(huge)
    const ready = (await rawRequest('GET', `${adminUrl(gw)}/readyz`)).json() as {
      warnings: string[]
    }
    expect(ready.warnings.join('\n')).not.toContain('unreachable')
  })
})

describe('members that fail or hang', () => {
  it("answers within fanOutTimeoutMs with the other members' items; a short ttl, not cached", async () => {
    const weather = await closing(startWeatherServer())
    const hung = await closing(startNonValidatingBackend({ behaviour: () => 'hang' }))
    const gw = await startTestGateway({
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        slow: { upstreams: [{ url: hung.url }] },
      },
      cache: {},
      virtualServers: { ws: { members: ['weather', 'slow'], fanOutTimeoutMs: 300 } },
    })
    const started = performance.now()
    const { names, result } = await toolNames(gw.mcpUrl('ws'))
    // Generous margin: the point is that the hung member (30 s response timeout) is not waited for.
    expect(performance.now() - started).toBeLessThan(5000)
    expect(names).toEqual([...WEATHER_TOOLS].sort())
    expect(result.ttlMs).toBeLessThanOrEqual(5000)
    expect(
      gw.logs.some(
        (l) =>
          l.msg?.toString().startsWith('virtual server: members left out') &&
          JSON.stringify(l.missing) === '["slow"]',
      ),
    ).toBe(true)
    // Not cached as complete: the next request asks the members again.
    const before = hung.calls('tools/list').length
    await toolNames(gw.mcpUrl('ws'))
    expect(hung.calls('tools/list').length).toBe(before + 1)
  })

  it('leaves out a member that fails', async () => {
    const weather = await closing(startWeatherServer())
    const broken = await closing(
      startNonValidatingBackend({ behaviour: () => ({ status: 500, body: 'oops' }) }),
    )
    const gw = await startTestGateway({
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        broken: { upstreams: [{ url: broken.url }], retry: { attempts: 0 } },
      },
      virtualServers: { ws: { members: ['weather', 'broken'] } },
    })
    const { names, result } = await toolNames(gw.mcpUrl('ws'))
    expect(names).toEqual([...WEATHER_TOOLS].sort())
    expect(result.ttlMs).toBeLessThanOrEqual(5000)
    const discover = await mcpPost(gw.mcpUrl('ws'), 'server/discover')
    expect(discover.response().result).toMatchObject({
      _meta: {
        'io.modelcontextprotocol/serverInfo': { name: PACKAGE.name, version: PACKAGE.version },
      },
      supportedVersions: ['2026-07-28'],
    })
    expect(discover.response().result).not.toHaveProperty('serverInfo')
  })
})

/** A config folder holding main.yaml; removed after the test. */
function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-virtual-it-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

describe("policy is the members' policy", () => {
  it("hides a member's tool in the merged list and denies it by prefixed name", async () => {
    const m = await members()
    const dir = policyDir(`
rules:
  - name: weather-reads
    servers: [weather]
    allow:
      tools: ["get_*"]
  - name: tickets-all
    servers: [tickets]
    allow:
      tools: ["*"]
  - name: no-deletes
    servers: ["*"]
    deny:
      tools: ["delete_*"]
`)
    const gw = await startTestGateway(
      {
        servers: servers(m),
        policies: '.',
        virtualServers: { ws: { members: ['weather', 'tickets'] } },
      },
      { dir },
    )
    const { names } = await toolNames(gw.mcpUrl('ws'))
    expect(names).toContain('weather_get_forecast')
    expect(names).not.toContain('weather_slow_forecast')
    expect(names).not.toContain('weather_delete_station')
    expect(names).not.toContain('tickets_delete_station')
    expect(names).toContain('tickets_slow_forecast')
    const res = await mcpPost(
      gw.mcpUrl('ws'),
      'tools/call',
      { name: 'weather_delete_station', arguments: { station: 'x' } },
      { id: 'd' },
    )
    expect(res.status).toBe(200)
    expect(res.response()).toMatchObject({
      id: 'd',
      error: { code: -32602, message: 'Unknown tool: weather_delete_station' },
    })
    const tickets = await mcpPost(
      gw.mcpUrl('ws'),
      'tools/call',
      { name: 'tickets_delete_station', arguments: { station: 'x' } },
      { id: 'e' },
    )
    expect(tickets.response()).toMatchObject({
      id: 'e',
      error: { code: -32602, message: 'Unknown tool: tickets_delete_station' },
    })
    expect(m.tickets.calls('tools/call')).toHaveLength(0)
    // Decided on each member under its own name, and audited there.
    const denials = gw.logs.filter(
      (l) => l.audit === true && JSON.stringify(l).includes('delete_station'),
    )
    expect(denials.map((l) => l.server).sort()).toEqual(['tickets', 'weather'])
  })
})

describe("rate limits are the members' limits", () => {
  it("counts a routed call against the member's limit, shared with its own endpoint", async () => {
    const weather = await closing(startWeatherServer())
    const docs = await closing(startDocsServer())
    const dir = policyDir(`
rules:
  - { name: all, servers: ["*"], allow: { tools: ["*"] } }
limits:
  - { name: forecasts, servers: [weather], tools: [get_forecast], key: ip, rate: 2/hour, burst: 2 }
`)
    const gw = await startTestGateway(
      {
        servers: {
          weather: { upstreams: [{ url: weather.url }] },
          docs: { upstreams: [{ url: docs.url }] },
        },
        policies: '.',
        virtualServers: { ws: { members: ['weather', 'docs'] } },
      },
      { dir },
    )
    const call = (url: string, id: number) =>
      mcpPost(url, 'tools/call', { name: 'get_forecast', arguments: { city: 'Oslo' } }, { id })
    expect((await call(gw.mcpUrl('ws'), 1)).status).toBe(200)
    expect((await call(gw.mcpUrl('weather'), 2)).status).toBe(200)
    const refused = await call(gw.mcpUrl('ws'), 3)
    expect(refused.status).toBe(429)
    expect(refused.response()).toMatchObject({ id: 3, error: { data: { reason: 'rate_limited' } } })
    // search_docs is docs', which has no limit.
    const other = await mcpPost(gw.mcpUrl('ws'), 'tools/call', {
      name: 'search_docs',
      arguments: { query: 'x' },
    })
    expect(other.status).toBe(200)
  })
})

describe('merged cache', () => {
  it('serves a merged list again from the cache, with the minimum ttl and the member scopes', async () => {
    const weather = await closing(startWeatherServer())
    const tickets = await closing(
      startSdkServer({
        name: 'tickets',
        cacheHints: { 'tools/list': { ttlMs: 30_000, cacheScope: 'public' } },
      }),
    )
    const gw = await startTestGateway({
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        tickets: { upstreams: [{ url: tickets.url }] },
      },
      cache: {},
      virtualServers: { ws: { members: ['weather', 'tickets'] } },
    })
    // A member's listen stream, once acknowledged, drops what it covers, merged answers included.
    await expect
      .poll(() => ['weather', 'tickets'].every((m) => gw.cache?.invalidator.isConnected(m)))
      .toBe(true)
    const first = await toolNames(gw.mcpUrl('ws'))
    expect(first.result.cacheScope).toBe('public')
    expect(first.result.ttlMs).toBeGreaterThan(0)
    expect(first.result.ttlMs).toBeLessThanOrEqual(30_000)
    const seen = tickets.calls('tools/list').length
    const second = await toolNames(gw.mcpUrl('ws'))
    expect(second.names).toEqual(first.names)
    expect(tickets.calls('tools/list')).toHaveLength(seen)
    expect(gw.logs.filter((l) => l.msg === 'request').at(-1)).toMatchObject({
      outcome: 'cache_hit',
    })
  })
})
