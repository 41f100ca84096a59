import { describe, expect, it, onTestFinished } from 'vitest'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import { forecastFor, startWeatherServer } from '../../deploy/demo/weather-server.js'
import {
  connectClient,
  connectLegacyClient,
  rawPost,
  rawRequest,
  LEGACY_INITIALIZE,
} from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startLegacyV1Server, startSdkServer } from '../helpers/sdk-servers.js'
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const KEY = 'a-test-key-of-at-least-16-chars'
const LEGACY_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
}

async function members() {
  const weather = await closing(startWeatherServer())
  const docs = await closing(startDocsServer())
  const tickets = await closing(startSdkServer({ name: 'tickets', toolsPageSize: 2 }))
  // a 2025-era server (v1 SDK, sessions): tool echo, resource legacy://info, prompt hello
  const old = await closing(startLegacyV1Server())
  return { weather, docs, tickets, old }
}

function config(m: Awaited<ReturnType<typeof members>>, key = KEY): Record<string, unknown> {
  return {
    legacySessions: { key },
    servers: {
      weather: { upstreams: [{ url: m.weather.url }] },
      docs: { upstreams: [{ url: m.docs.url }] },
      tickets: { upstreams: [{ url: m.tickets.url }] },
      old: { upstreams: [{ url: m.old.url }] },
    },
    virtualServers: {
      workspace: {
        members: ['weather', 'docs', 'tickets', 'old'],
        prefix: 'onCollision',
        resources: { 'docs://*': 'docs' },
      },
    },
  }
}

/** A v1 client whose every HTTP request goes to the next gateway in turn. */
async function alternatingClient(gateways: readonly TestGateway[]) {
  const hits = gateways.map(() => 0)
  let next = 0
  const fetchVia = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const i = next++ % gateways.length
    hits[i] = (hits[i] ?? 0) + 1
    const url = new URL(input instanceof Request ? input.url : input)
    url.host = new URL((gateways[i] as TestGateway).url).host
    return fetch(url, init)
  }
  const transport = new V1Transport(new URL((gateways[0] as TestGateway).mcpUrl('workspace')), {
    fetch: fetchVia,
  })
  const client = new V1Client({ name: 'legacy-through-two-gateways', version: '1.0.0' })
  await client.connect(transport)
  onTestFinished(() => client.close())
  return { client, transport, hits }
}

/** The 2025-only member, reached within a session the gateway opened with it. */
async function expectOldMemberWorks(
  client: Pick<V1Client, 'callTool' | 'readResource' | 'getPrompt'>,
  m: Awaited<ReturnType<typeof members>>,
): Promise<void> {
  const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
  expect(textOf(echo)).toBe('echo: hi')
  const info = await client.readResource({ uri: 'legacy://info' })
  expect(info.contents[0]).toMatchObject({ text: 'a 2025-era server' })
  const hello = await client.getPrompt({ name: 'hello' })
  expect(hello.messages).toHaveLength(1)
  const sessions = new Set(
    m.old.requests.map((r) => r.header('mcp-session-id')).filter((s) => s !== undefined),
  )
  expect(sessions.size).toBeGreaterThanOrEqual(1)
  expect(m.old.calls('initialize').length).toBeGreaterThanOrEqual(1)
  // the member was spoken to in its own era
  const call = m.old.calls('tools/call').at(-1)
  expect(call?.header('mcp-protocol-version')).toMatch(/^2025-/)
  expect(call?.header('mcp-method')).toBeUndefined()
}

describe('a virtual server with a 2025-only member, for the v2 client (auto)', () => {
  it('discovers, lists, calls, reads and gets prompts across both eras', async () => {
    const m = await members()
    const gw = await startTestGateway(config(m))
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    expect(client.getProtocolEra()).toBe('modern')
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('echo')
    expect(tools.map((t) => t.name)).toContain('weather_get_forecast')
    await expectOldMemberWorks(client as unknown as V1Client, m)
    const forecast = await client.callTool({
      name: 'weather_get_forecast',
      arguments: { city: 'Oslo' },
    })
    expect(textOf(forecast)).toBe(forecastFor('Oslo'))
  })
})

describe('a virtual server for 2025-era clients (the v1 SDK client)', () => {
  it('initializes, lists, calls, reads, gets prompts and completes', async () => {
    const m = await members()
    const gw = await startTestGateway(config(m))
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    expect(client.getServerVersion()?.name).toBe('mcp-edge')
    const caps = client.getServerCapabilities()
    expect(caps?.tools).toBeDefined()
    expect(caps?.prompts).toBeDefined()
    // the members' change notifications reach the client on its GET stream; no subscriptions
    expect(caps?.tools?.listChanged).toBe(true)
    expect(caps?.resources?.subscribe).toBeUndefined()

    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('weather_get_forecast')
    expect(tools.map((t) => t.name)).toContain('search_docs')
    const forecast = await client.callTool({
      name: 'weather_get_forecast',
      arguments: { city: 'Oslo' },
    })
    expect(textOf(forecast)).toBe(forecastFor('Oslo'))
    expect(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).toBe('tickets')
    const read = await client.readResource({ uri: 'docs://readme' })
    expect(read.contents[0]?.uri).toBe('docs://readme')
    expect(m.tickets.calls('resources/read')).toHaveLength(0)
    const { prompts } = await client.listPrompts()
    expect(prompts.map((p) => p.name)).toContain('docs_summarize')
    const prompt = await client.getPrompt({
      name: 'docs_summarize',
      arguments: { topic: 'caching' },
    })
    expect(prompt.messages[0]?.content).toMatchObject({ text: 'Summarize the docs on caching.' })
    const done = await client.complete({
      ref: { type: 'ref/prompt', name: 'docs_summarize' },
      argument: { name: 'topic', value: 's' },
    })
    expect(done.completion.values).toEqual(['security', 'sessions'])
    await client.ping()
    await expectOldMemberWorks(client, m)
    // members were sent 2026-07-28 requests, never the gateway's session id
    expect(m.tickets.requests.length).toBeGreaterThan(0)
    expect(m.tickets.requests.every((r) => r.header('mcp-session-id') === undefined)).toBe(true)
    const call = m.tickets.calls('tools/call')[0]
    expect(call?.header('mcp-protocol-version')).toBe('2026-07-28')
    expect(call?.header('mcp-method')).toBe('tools/call')
    expect(call?.header('mcp-name')).toBe('whoami')
  })

  it('tells a 2025-only member only the capabilities it can use through the gateway', async () => {
    const m = await members()
    const gw = await startTestGateway(config(m))
    const capabilities = {
      sampling: {},
      elicitation: { form: {} },
      roots: { listChanged: true },
      experimental: { 'x-trace': {} },
    }
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace'), { capabilities }))
    await expectOldMemberWorks(client, m)
    const init = m.old.requests.find((r) => r.rpcMethod === 'initialize')
    const sent = (init?.json() as { params: { capabilities: Record<string, unknown> } }).params
    // Answers to the member's own requests cannot be carried back to it (docs/virtual-servers.md
    // §2025-era clients): announcing them would make the member wait for answers that never come.
    expect(sent.capabilities).toEqual({ experimental: { 'x-trace': {} } })
  })

  it('serves one session through two gateway processes alternately', async () => {
    const m = await members()
    const gws = [await startTestGateway(config(m)), await startTestGateway(config(m))]
    const { client, transport, hits } = await alternatingClient(gws)
    for (let i = 0; i < 3; i++) {
      const res = await client.callTool({
        name: 'weather_get_forecast',
        arguments: { city: `C${i}` },
      })
      expect(textOf(res)).toBe(forecastFor(`C${i}`))
    }
    expect((await client.listTools()).tools.length).toBeGreaterThan(5)
    for (let i = 0; i < 2; i++) {
      const res = await client.callTool({ name: 'echo', arguments: { text: `x${i}` } })
      expect(textOf(res)).toBe(`echo: x${i}`)
    }
    expect(hits.every((n) => n >= 2)).toBe(true)
    // each gateway process initialised its own session with the 2025-only member
    expect(m.old.calls('initialize')).toHaveLength(2)
    expect(transport.sessionId).toMatch(/^[A-Za-z0-9_-]+$/)
    // DELETE ends the member session the gateway that received it holds (one of the two)
    await transport.terminateSession()
    expect(m.old.requests.filter((r) => r.method === 'DELETE')).toHaveLength(1)
  })

  it('refuses unknown, tampered and foreign session ids with 404 and forwards nothing', async () => {
    const m = await members()
    const gw = await startTestGateway(config(m))
    const foreign = await startTestGateway(config(m, 'another-key-of-16-chars-or-more'))
    const init = await rawPost(foreign.mcpUrl('workspace'), LEGACY_INITIALIZE, LEGACY_HEADERS)
    expect(init.status).toBe(200)
    const sid = String(init.headers['mcp-session-id'])
    const before = m.tickets.requests.length
    for (const bad of [sid, `${sid.slice(0, -2)}AA`, 'nope']) {
      const res = await rawPost(
        gw.mcpUrl('workspace'),
        { jsonrpc: '2.0', id: 'x7', method: 'tools/list' },
        { ...LEGACY_HEADERS, 'mcp-session-id': bad },
      )
      expect(res.status).toBe(404)
      const body = res.json() as { id: unknown; error: { code: number; data: { reason: string } } }
      expect(body.id).toBe('x7')
      expect(body.error.code).toBe(-32001)
      expect(body.error.data.reason).toBe('session_not_found')
    }
    const missing = await rawPost(
      gw.mcpUrl('workspace'),
      { jsonrpc: '2.0', id: 'x8', method: 'tools/list' },
      LEGACY_HEADERS,
    )
    expect(missing.status).toBe(400)
    expect((missing.json() as { id: unknown }).id).toBe('x8')
    const after = m.tickets.requests.length
    expect(after).toBe(before)
    // so is the GET stream of a session this gateway did not issue: nothing is opened
    const get = await rawRequest('GET', gw.mcpUrl('workspace'), {
      headers: {
        accept: 'text/event-stream',
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-11-25',
      },
    })
    expect(get.status).toBe(404)
    expect((get.json() as { error: { data: { reason: string } } }).error.data.reason).toBe(
      'session_not_found',
    )
    expect(m.tickets.requests.length).toBe(before)
    expect(m.old.requests.filter((r) => r.method === 'GET')).toHaveLength(0)
  })
})
