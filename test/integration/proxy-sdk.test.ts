import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { describe, expect, it, onTestFinished } from 'vitest'
import { forecastFor } from '../../deploy/demo/weather-server.js'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { SDK_SERVER_TOOLS, startLegacyV1Server, startSdkServer } from '../helpers/sdk-servers.js'
import { closing, textOf } from '../helpers/lifecycle.js'

/** Both backend modes: the gateway verifies bodies, or trusts a backend that checks headers. */
const MODES = [
  ['verifying bodies (trustHeaders: false)', false],
  ['trusting headers (trustHeaders: true)', true],
] as const

describe.each(MODES)('the official v2 client through the gateway, %s', (_label, trustHeaders) => {
  async function setup(opts: Parameters<typeof startSdkServer>[0] = {}) {
    const server = await closing(startSdkServer(opts))
    const gw = await startTestGateway(oneServer(server.url, { trustHeaders }))
    const client = await closing(connectClient(gw.mcpUrl('app')))
    return { server, gw, client }
  }

  it('discovers, walks paginated tools/list and calls a tool', async () => {
    const { server, gw, client } = await setup({ toolsPageSize: 2 })
    expect(client.getProtocolEra()).toBe('modern')
    expect(client.getDiscoverResult()).toBeDefined()
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
    const result = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(result)).toBe(forecastFor('Oslo'))
    // Every request reached the backend with the client's headers intact.
    const call = server.calls('tools/call')[0]
    expect(call?.header('mcp-name')).toBe('get_forecast')
    expect(call?.header('mcp-method')).toBe('tools/call')
    expect(call?.header('x-forwarded-for')).toBe('127.0.0.1')
    expect(server.calls('tools/list')).toHaveLength(3)
    const lines = gw.logs.filter((l) => l.msg === 'request')
    expect(lines.at(-1)).toMatchObject({
      server: 'app',
      method: 'tools/call',
      name: 'get_forecast',
      status: 200,
      outcome: 'ok',
      upstream: 'app#0',
    })
  })

  it('streams progress while the tool runs, not all at the end', async () => {
    const { client } = await setup()
    const progressAt: number[] = []
    const result = await client.callTool(
      { name: 'slow_forecast', arguments: { city: 'Rome', steps: 3 } },
      { onprogress: () => void progressAt.push(performance.now()) },
    )
    const doneAt = performance.now()
    expect(textOf(result)).toBe(forecastFor('Rome'))
    expect(progressAt).toHaveLength(3)
    // The server sends a frame every ~150 ms; buffered, they would all arrive with the result.
    expect(doneAt - (progressAt[0] as number)).toBeGreaterThan(200)
  })

  it('forwards Mcp-Param-* headers untouched', async () => {
    const { server, client } = await setup()
    await client.listTools()
    const result = await client.callTool({ name: 'get_alerts', arguments: { region: 'Zürich ' } })
    expect(textOf(result)).toBe('No active alerts for Zürich ')
    const call = server.calls('tools/call')[0]
    expect(call?.rawHeaders).toContain('Mcp-Param-Region')
  })

  it('completes an input_required round trip', async () => {
    const { server, client } = await setup()
    client.setRequestHandler('elicitation/create', () => ({
      action: 'accept',
      content: { confirm: true },
    }))
    const result = await client.callTool({
      name: 'confirm_action',
      arguments: { action: 'deploy' },
    })
    expect(textOf(result)).toBe('confirmed: deploy')
    expect(server.calls('tools/call')).toHaveLength(2)
  })

  it('serves resources, templates, prompts and completion', async () => {
    const { client } = await setup()
    expect((await client.listResources()).resources.map((r) => r.uri)).toContain('docs://readme')
    expect((await client.readResource({ uri: 'docs://readme' })).contents[0]).toMatchObject({
      text: '# demo-docs\n',
    })
    expect((await client.listResourceTemplates()).resourceTemplates[0]?.uriTemplate).toBe(
      'docs://pages/{name}',
    )
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(['summarize', 'review'])
    const prompt = await client.getPrompt({ name: 'summarize', arguments: { topic: 'caching' } })
    expect(prompt.messages[0]?.content).toMatchObject({ text: 'Summarize the docs on caching.' })
    const done = await client.complete({
      ref: { type: 'ref/prompt', name: 'summarize' },
      argument: { name: 'topic', value: 's' },
    })
    expect(done.completion.values).toEqual(['security', 'sessions'])
  })

  it('keeps a subscriptions/listen stream open and delivers list_changed', async () => {
    const { server, client } = await setup()
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler('notifications/tools/list_changed', () => resolve())
    })
    const subscription = await client.listen({ toolsListChanged: true })
    onTestFinished(() => subscription.close())
    expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true })
    await new Promise((r) => setTimeout(r, 100))
    server.notify.toolsChanged()
    await changed
  })

  it('cancels the upstream call when the client aborts', async () => {
    const { server, client } = await setup()
    const abort = new AbortController()
    const call = client.callTool(
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 50 } },
      { signal: abort.signal },
    )
    setTimeout(() => abort.abort(), 300)
    await expect(call).rejects.toThrow()
    await server.waitForAborts(1, 2000)
    expect(server.abortedCalls).toBe(1)
  })
})

describe('2025-era clients and servers through the gateway', () => {
  it('serves the official v1 client against a v2 server with legacy support', async () => {
    const server = await closing(startSdkServer())
    const gw = await startTestGateway(oneServer(server.url))
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    expect((await client.listTools()).tools).toHaveLength(SDK_SERVER_TOOLS.length)
    const result = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(result)).toBe(forecastFor('Oslo'))
    expect(
      gw.logs.filter((l) => l.msg === 'request' && l.method === 'tools/call').at(-1),
    ).toMatchObject({ era: 'legacy', name: 'get_forecast' })
  })

  it('keeps a v1 stateful session (initialize, session id, GET stream, DELETE) working', async () => {
    const server = await closing(startLegacyV1Server())
    const gw = await startTestGateway(oneServer(server.url))
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe(
      'echo: hi',
    )
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve())
    })
    await expect.poll(() => server.requests.some((r) => r.method === 'GET')).toBe(true)
    server.notify.toolsChanged()
    await changed
  })

  it('lets the v2 auto client fall back to 2025 against a v1 server (the probe stays a 4xx)', async () => {
    const server = await closing(startLegacyV1Server())
    const gw = await startTestGateway(oneServer(server.url))
    const client = await closing(connectClient(gw.mcpUrl('app')))
    expect(client.getProtocolEra()).toBe('legacy')
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'x' } }))).toBe(
      'echo: x',
    )
    const probe = gw.logs.find((l) => l.msg === 'request' && l.method === 'server/discover')
    expect(probe?.status).toBe(400)
  })
})
