import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { ServerCatalog } from '../../src/catalog/curate.js'
import {
  connectClient,
  connectLegacyClient,
  mcpHeaders,
  mcpPost,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { cacheGateway, cacheEvents, post, rawBody } from '../helpers/cache.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'

const NEW_TEXT = 'Forecast for a city (metric units).'

/** The curation of docs/catalog.md §Curation, on the SDK test server's tools and prompts. */
const CURATED = {
  tools: {
    get_forecast: { name: 'forecast', description: NEW_TEXT, annotations: { readOnlyHint: true } },
    delete_station: { hidden: true },
  },
  prompts: {
    summarize: { name: 'summary', title: 'Summary' },
    review: { hidden: true },
  },
}

async function curatedGateway(
  backend: SdkTestServer,
  server: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  dir?: string,
): Promise<TestGateway> {
  return startTestGateway(
    { servers: { app: { upstreams: [{ url: backend.url }], ...CURATED, ...server } }, ...extra },
    { start: { watch: false }, ...(dir === undefined ? {} : { dir }) },
  )
}

/** The name each recorded request of `method` carried in its body and in Mcp-Name. */
function sent(backend: SdkTestServer, method: string): { body: unknown; header: unknown }[] {
  return backend.calls(method).map((r) => {
    const params = (r.json() as { params: { name?: string; ref?: { name?: string } } }).params
    return { body: params.name ?? params.ref?.name, header: r.header('mcp-name') }
  })
}

/** An in-band "unknown tool" answer with this id, as the SDK server itself words one. */
function expectUnknown(res: RawResponse, id: unknown, what: string): void {
  expect(res.status).toBe(200)
  const msg = res.response()
  expect(msg.id).toBe(id)
  expect(msg.error?.code).toBe(-32602)
  expect(msg.error?.message).toBe(what)
}

describe('catalog curation: renames, replaced text and hidden definitions', () => {
  it('v2 client: lists show curated names and text; a call to a curated name reaches the backend name', async () => {
    const backend = await closing(startSdkServer())
    const gw = await curatedGateway(backend)
    const client = await connectClient(gw.mcpUrl('app'))
    onTestFinished(() => client.close())

    const { tools } = await client.listTools()
    const names = tools.map((t) => t.name)
    expect(names).toContain('forecast')
    expect(names).not.toContain('get_forecast')
    expect(names).not.toContain('delete_station')
    expect(names).toContain('get_alerts') // uncurated tools are untouched
    const forecast = tools.find((t) => t.name === 'forecast')
    expect(forecast?.description).toBe(NEW_TEXT)
    expect(forecast?.annotations).toEqual({ readOnlyHint: true })
    expect(forecast?.inputSchema).toMatchObject({ properties: { city: { type: 'string' } } })

    const result = await client.callTool({ name: 'forecast', arguments: { city: 'Paris' } })
    expect(textOf(result)).toContain('Paris')
    expect(sent(backend, 'tools/call')).toEqual([{ body: 'get_forecast', header: 'get_forecast' }])

    const { prompts } = await client.listPrompts()
    expect(prompts.map((p) => p.name).sort()).toEqual(['summary'])
    expect(prompts[0]?.title).toBe('Summary')
    const prompt = await client.getPrompt({ name: 'summary', arguments: { topic: 'cache' } })
    expect(JSON.stringify(prompt.messages)).toContain('Summarize the docs on cache')
    expect(sent(backend, 'prompts/get')).toEqual([{ body: 'summarize', header: 'summarize' }])
    const done = await client.complete({
      ref: { type: 'ref/prompt', name: 'summary' },
      argument: { name: 'topic', value: 'ca' },
    })
    expect(done.completion.values).toContain('caching')
    expect(sent(backend, 'completion/complete')).toEqual([{ body: 'summarize', header: undefined }])
  })

  it('v1 client (2025-11-25): the same view, and the same round trip', async () => {
    const backend = await closing(startSdkServer())
    const gw = await curatedGateway(backend)
    const client = await connectLegacyClient(gw.mcpUrl('app'))
    onTestFinished(() => client.close())
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).not.toContain('get_forecast')
    expect(tools.find((t) => t.name === 'forecast')?.description).toBe(NEW_TEXT)
    expect(tools.map((t) => t.name)).not.toContain('delete_station')
    const result = await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' } })
    expect(textOf(result)).toContain('Oslo')
    expect(sent(backend, 'tools/call').map((s) => s.body)).toEqual(['get_forecast'])
    const { prompts } = await client.listPrompts()
    expect(prompts.map((p) => p.name)).toEqual(['summary'])
    const old = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } }).then(
      () => 'answered',
      (err: unknown) => String(err),
    )
    expect(old).toContain('Unknown tool: get_forecast')
    expect(sent(backend, 'tools/call')).toHaveLength(1)
  })

  it('an SSE list answer is rewritten as a JSON one', async () => {
    const backend = await closing(startSdkServer({ responseMode: 'sse' }))
    const gw = await curatedGateway(backend)
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/list', {}, { id: 'sse' })
    expect(res.headers['content-type']).toContain('text/event-stream')
    const names = (res.response().result as { tools: { name: string }[] }).tools.map((t) => t.name)
    expect(names).toContain('forecast')
    expect(names).not.toContain('get_forecast')
    expect(names).not.toContain('delete_station')
  })

  it('the old name, a hidden name and their loose variants are unknown; nothing is forwarded', async () => {
    const backend = await closing(startSdkServer())
    const gw = await curatedGateway(backend)
    const url = gw.mcpUrl('app')
    for (const [name, id] of [
      ['get_forecast', 11],
      ['delete_station', 12],
      ['GET_FORECAST', 13],
      ['Delete_Station', 14],
    ] as const) {
      const res = await mcpPost(url, 'tools/call', { name, arguments: { city: 'x' } }, { id })
      expectUnknown(res, id, `Unknown tool: ${name}`)
    }
    const prompt = await mcpPost(url, 'prompts/get', { name: 'review', arguments: {} }, { id: 'p' })
    expectUnknown(prompt, 'p', 'Unknown prompt: review')
    const completion = await mcpPost(
      url,
      'completion/complete',
      { ref: { type: 'ref/prompt', name: 'summarize' }, argument: { name: 'topic', value: 'c' } },
      { id: 'c' },
    )
    expectUnknown(completion, 'c', 'Unknown prompt: summarize')
    expect(backend.calls('tools/call')).toHaveLength(0)
    expect(backend.calls('prompts/get')).toHaveLength(0)
    expect(backend.calls('completion/complete')).toHaveLength(0)
  })

  it('rewrites only the name: every other byte of the body is the client’s', async () => {
    const backend = await closing(startSdkServer())
    const gw = await curatedGateway(backend)
    const text = rawBody('"r\\u0031"', 'tools/call', {
      name: 'forecast',
      arguments: { city: 'Zürich', note: 'name: "forecast"' },
    }).replace('"name":"forecast"', '"name" :  "forecast"')
    const res = await rawPost(gw.mcpUrl('app'), text, mcpHeaders('tools/call', 'forecast'))
    expect(res.status).toBe(200)
    expect(res.response().id).toBe('r1')
    const [call] = backend.calls('tools/call')
    expect(call?.body.toString('utf8')).toBe(
      text.replace('"name" :  "forecast"', '"name" :  "get_forecast"'),
    )
  })
})

describe('catalog curation: Mcp-Name and the body must name the same definition', () => {
  const cases = [
    ['a curated header over the backend name in the body', 'forecast', 'get_forecast'],
    ['the backend name in the header over a curated body', 'get_forecast', 'forecast'],
    ['a case variant in the header', 'Forecast', 'forecast'],
  ] as const
  for (const trustHeaders of [false, true]) {
    for (const [title, header, body] of cases) {
      it(`${title} is refused${trustHeaders ? ' (trustHeaders: true)' : ''}`, async () => {
        const backend = await closing(startSdkServer())
        const gw = await curatedGateway(backend, { trustHeaders })
        const res = await mcpPost(
          gw.mcpUrl('app'),
          'tools/call',
          { name: body, arguments: { city: 'x' } },
          { id: 'm1', headers: { 'mcp-name': header } },
        )
        expect(res.status).toBe(400)
        const msg = res.response()
        expect(msg.id).toBe('m1')
        expect(msg.error?.code).toBe(-32020)
        expect(backend.calls('tools/call')).toHaveLength(0)
      })
    }
  }

  it('a curated name equal to another tool’s backend name reaches the renamed one only', async () => {
    const backend = await closing(startSdkServer())
    const gw = await curatedGateway(backend, {
      tools: { get_forecast: { name: 'get_alerts' }, get_alerts: { hidden: true } },
    })
    const client = await connectClient(gw.mcpUrl('app'))
    onTestFinished(() => client.close())
    const { tools } = await client.listTools()
    const alerts = tools.filter((t) => t.name === 'get_alerts')
    expect(alerts).toHaveLength(1)
    expect(alerts[0]?.description).toBe('Weather forecast for a city')
    await client.callTool({ name: 'get_alerts', arguments: { city: 'Rome' } })
    expect(sent(backend, 'tools/call')).toEqual([{ body: 'get_forecast', header: 'get_forecast' }])
  })
})

describe('catalog curation with policies and the edge cache', () => {
  function policyDir(rules: string): string {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-catalog-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'main.yaml'), rules)
    return dir
  }

  it('policies name backend names: they filter lists and judge calls to curated names', async () => {
    const backend = await closing(startSdkServer())
    const dir = policyDir(
      'rules:\n  - name: reads\n    servers: [app]\n    allow: { tools: [get_forecast, get_alerts] }\n',
    )
    const gw = await curatedGateway(backend, {}, { policies: '.' }, dir)
    const client = await connectClient(gw.mcpUrl('app'))
    onTestFinished(() => client.close())
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(['forecast', 'get_alerts'])
    await client.callTool({ name: 'forecast', arguments: { city: 'Lima' } })
    expect(sent(backend, 'tools/call').map((s) => s.body)).toEqual(['get_forecast'])
    const audit = gw.logs.filter((l) => l.audit === true && l.target === 'get_forecast')
    expect(audit.map((l) => l.decision)).toEqual(['allow'])
  })

  it('a policy denial of the backend name answers with the client’s name', async () => {
    const backend = await closing(startSdkServer())
    const dir = policyDir(
      'rules:\n  - name: alerts\n    servers: [app]\n    allow: { tools: [get_alerts] }\n',
    )
    const gw = await curatedGateway(backend, {}, { policies: '.' }, dir)
    const res = await mcpPost(
      gw.mcpUrl('app'),
      'tools/call',
      { name: 'forecast', arguments: { city: 'x' } },
      { id: 7 },
    )
    expectUnknown(res, 7, 'Unknown tool: forecast')
    expect(backend.calls('tools/call')).toHaveLength(0)
  })

  it('a curated list stays public in the cache; hits serve the curated bytes', async () => {
    const backend = await closing(
      startSdkServer({ cacheHints: { 'tools/list': { ttlMs: 60_000, cacheScope: 'public' } } }),
    )
    const gw = await cacheGateway(
      backend.url,
      {},
      { servers: { app: { upstreams: [{ url: backend.url }], ...CURATED } } },
    )
    // Entries are stored once the server's change notifications are subscribed (docs/cache.md).
    await expect
      .poll(() => gw.cache?.invalidator.isConnected('app') === true, { message: 'listen stream' })
      .toBe(true)
    const rewrites = vi.spyOn(ServerCatalog.prototype, 'apply')
    onTestFinished(() => rewrites.mockRestore())
    const first = await post(gw.app, '1')
    const second = await post(gw.app, '2')
    await post(gw.app, '3')
    // The upstream answer once, then the cached variant once: never per hit.
    expect(rewrites).toHaveBeenCalledTimes(2)
    for (const res of [first, second]) {
      const result = res.response().result as { tools: { name: string }[]; cacheScope: string }
      expect(result.cacheScope).toBe('public')
      expect(result.tools.map((t) => t.name)).toContain('forecast')
      expect(result.tools.map((t) => t.name)).not.toContain('delete_station')
    }
    const toolsOf = (res: RawResponse): unknown =>
      (res.response().result as { tools: unknown }).tools
    expect(toolsOf(second)).toEqual(toolsOf(first))
    expect(backend.calls('tools/list')).toHaveLength(1)
    expect(await cacheEvents(gw, 'hit')).toBe(2)
  })
})

describe('catalog curation through a virtual server', () => {
  it('members’ curated names are merged and prefixed; routed calls undo the prefix, then the curation', async () => {
    const app = await closing(startSdkServer())
    const other = await closing(startSdkServer({ name: 'other' }))
    const gw = await startTestGateway(
      {
        servers: {
          app: { upstreams: [{ url: app.url }], ...CURATED },
          other: { upstreams: [{ url: other.url }] },
        },
        virtualServers: { all: { members: ['app', 'other'], prefix: 'always' } },
      },
      { start: { watch: false } },
    )
    const client = await connectClient(gw.mcpUrl('all'))
    onTestFinished(() => client.close())
    const { tools } = await client.listTools()
    const names = tools.map((t) => t.name)
    expect(names).toContain('app_forecast')
    expect(names).toContain('other_get_forecast')
    expect(names).not.toContain('app_get_forecast')
    expect(names).not.toContain('app_delete_station')
    expect(tools.find((t) => t.name === 'app_forecast')?.description).toBe(NEW_TEXT)
    await client.callTool({ name: 'app_forecast', arguments: { city: 'Graz' } })
    expect(sent(app, 'tools/call')).toEqual([{ body: 'get_forecast', header: 'get_forecast' }])
    for (const [name, id] of [
      ['app_get_forecast', 1],
      ['app_delete_station', 2],
    ] as const) {
      const res = await mcpPost(gw.mcpUrl('all'), 'tools/call', { name, arguments: {} }, { id })
      expectUnknown(res, id, `Unknown tool: ${name}`)
    }
    expect(app.calls('tools/call')).toHaveLength(1)
  })
})
