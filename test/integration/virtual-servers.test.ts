import { describe, expect, it } from 'vitest'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import { forecastFor, startWeatherServer } from '../../deploy/demo/weather-server.js'
import { connectClient } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

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
    expect(discovered?.serverInfo.name).toBe('mcp-edge')
    expect(discovered?.capabilities.tools).toBeDefined()
    expect(discovered?.capabilities.prompts).toBeDefined()
    expect(discovered?.capabilities.resources).toBeDefined()

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
