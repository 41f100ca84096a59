import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { setTimeout as sleep } from 'node:timers/promises'
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { ANY_PORTS, startDemoServers } from '../../deploy/demo/servers.js'
import { serveMcpHandler } from '../../deploy/demo/serve.js'
import { forecastFor, registerWeatherTools } from '../../deploy/demo/weather-server.js'
import {
  connectClient,
  connectLegacyClient,
  encodeHeaderValue,
  mcpPost,
  rawPost,
  rawRequest,
} from '../helpers/clients.js'
import {
  SDK_SERVER_TOOLS,
  sseEvent,
  startLegacyV1Server,
  startNonValidatingBackend,
  startSdkServer,
} from '../helpers/sdk-servers.js'
import { closing, collectGarbage, textOf } from '../helpers/lifecycle.js'

describe('demo servers', () => {
  it('serve weather tools and docs resources, prompts and completions', async () => {
    const demo = await closing(startDemoServers(ANY_PORTS))
    const weather = await closing(connectClient(demo.weather.url))
    expect(weather.getProtocolEra()).toBe('modern')
    const { tools } = await weather.listTools()
    expect(tools.map((t) => t.name)).toEqual(SDK_SERVER_TOOLS.filter((n) => n !== 'whoami'))
    const alerts = tools.find((t) => t.name === 'get_alerts')
    expect(alerts?.inputSchema.properties?.['region']).toMatchObject({ 'x-mcp-header': 'Region' })
    const forecast = await weather.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(forecast)).toBe(forecastFor('Oslo'))

    const docs = await closing(connectClient(demo.docs.url))
    const { resources } = await docs.listResources()
    expect(resources.map((r) => r.uri)).toContain('docs://readme')
    const page = await docs.readResource({ uri: 'docs://pages/install' })
    expect(page.contents[0]).toMatchObject({ uri: 'docs://pages/install' })
    const { resourceTemplates } = await docs.listResourceTemplates()
    expect(resourceTemplates[0]?.uriTemplate).toBe('docs://pages/{name}')
    const { prompts } = await docs.listPrompts()
    expect(prompts.map((p) => p.name)).toEqual(['summarize', 'review'])
    const done = await docs.complete({
      ref: { type: 'ref/prompt', name: 'summarize' },
      argument: { name: 'topic', value: 's' },
    })
    expect(done.completion.values).toEqual(['security', 'sessions'])
  })

  it('advertise public cache hints for their lists', async () => {
    const demo = await closing(startDemoServers(ANY_PORTS))
    const tools = (await mcpPost(demo.weather.url, 'tools/list')).response().result
    expect(tools).toMatchObject({ ttlMs: 60_000, cacheScope: 'public' })
    const prompts = (await mcpPost(demo.docs.url, 'prompts/list')).response().result
    expect(prompts).toMatchObject({ ttlMs: 30_000, cacheScope: 'public' })
  })
})

describe('startSdkServer', () => {
  it('pages tools/list and the client walks every page', async () => {
    const server = await closing(startSdkServer({ toolsPageSize: 2 }))
    const client = await closing(connectClient(server.url))
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
    const cursors = server.calls('tools/list').map((r) => (r.json() as ListBody).params?.cursor)
    expect(cursors).toEqual([undefined, '2', '4'])
  })

  it('streams progress before the result and records headers as sent', async () => {
    const server = await closing(startSdkServer())
    const client = await closing(connectClient(server.url, { auth: 'client-token' }))
    const progressAt: number[] = []
    const result = await client.callTool(
      { name: 'slow_forecast', arguments: { city: 'Rome', steps: 3 } },
      { onprogress: () => void progressAt.push(performance.now()) },
    )
    const resultAt = performance.now()
    expect(textOf(result)).toBe(forecastFor('Rome'))
    expect(progressAt).toHaveLength(3)
    // ~300 ms between first progress and result: the frames were streamed, not buffered
    expect(resultAt - (progressAt[0] ?? resultAt)).toBeGreaterThan(200)
    const [call] = server.calls('tools/call')
    expect(call?.header('mcp-name')).toBe('slow_forecast')
    expect(call?.header('authorization')).toBe('Bearer client-token')
    expect(call?.rawHeaders).toContain('mcp-method')
  })

  it('sends x-mcp-header arguments as Mcp-Param headers', async () => {
    const server = await closing(startSdkServer())
    const client = await closing(connectClient(server.url))
    await client.listTools()
    const result = await client.callTool({ name: 'get_alerts', arguments: { region: 'Zürich ' } })
    expect(textOf(result)).toBe('No active alerts for Zürich ')
    const [call] = server.calls('tools/call')
    expect(call?.header('mcp-param-region')).toBe(encodeHeaderValue('Zürich '))
    expect(call?.rawHeaders).toContain('Mcp-Param-Region')
    expect(call?.header('authorization')).toBeUndefined()
  })

  it('completes an input_required round trip through the client elicitation handler', async () => {
    const server = await closing(startSdkServer())
    const client = await closing(connectClient(server.url))
    client.setRequestHandler('elicitation/create', () => ({
      action: 'accept',
      content: { confirm: true },
    }))
    const result = await client.callTool({
      name: 'confirm_action',
      arguments: { action: 'deploy' },
    })
    expect(textOf(result)).toBe('confirmed: deploy')
    const [first, retry] = server.calls('tools/call').map((r) => r.json() as CallBody)
    expect(first?.params.inputResponses).toBeUndefined()
    expect(retry?.params).toMatchObject({
      requestState: 'confirm:deploy',
      inputResponses: { confirm: {} },
    })
  })

  it('serves resources, templates, prompts and completions', async () => {
    const server = await closing(startSdkServer({ name: 'upstream-b' }))
    const client = await closing(connectClient(server.url))
    const readme = await client.readResource({ uri: 'docs://readme' })
    expect(readme.contents[0]).toMatchObject({ text: '# demo-docs\n' })
    expect((await client.listResourceTemplates()).resourceTemplates).toHaveLength(1)
    const prompt = await client.getPrompt({ name: 'summarize', arguments: { topic: 'caching' } })
    expect(prompt.messages[0]?.content).toMatchObject({ text: 'Summarize the docs on caching.' })
    const done = await client.complete({
      ref: { type: 'ref/resource', uri: 'docs://pages/{name}' },
      argument: { name: 'name', value: 'r' },
    })
    expect(done.completion.values).toEqual(['routing'])
    expect(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).toBe('upstream-b')
  })

  it('delivers tools list_changed on a listen stream after notify', async () => {
    const server = await closing(startSdkServer())
    const client = await closing(connectClient(server.url))
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler('notifications/tools/list_changed', () => resolve())
    })
    const subscription = await client.listen({ toolsListChanged: true })
    onTestFinished(() => subscription.close())
    expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true })
    server.notify.toolsChanged()
    await changed
    expect(server.calls('subscriptions/listen')).toHaveLength(1)
  })

  it('sees the abort when the client cancels a slow call', async () => {
    const server = await closing(startSdkServer())
    const client = await closing(connectClient(server.url))
    const abort = new AbortController()
    const call = client.callTool(
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 50 } },
      { signal: abort.signal },
    )
    setTimeout(() => abort.abort(), 200)
    await expect(call).rejects.toThrow()
    await server.waitForAborts(1)
    expect(server.abortedCalls).toBe(1)
  })

  // Node's fetch lets a Request's signal stop following its parent once it is collected, and a
  // clone's at the first collection: the backends must not depend on either (deploy/demo/serve.ts).
  it.each(
    (['2025-11-25', '2026-07-28'] as const).flatMap((era) => [
      [era, 'a demo server', () => weatherBackend()] as const,
      [era, 'a recording test server', () => startSdkServer({ responseMode: 'json' })] as const,
    ]),
  )('sees a %s client go away after a garbage collection (%s)', async (era, _, start) => {
    const server = await closing(start())
    const abort = new AbortController()
    const { call } = await slowCall(era, server.url, abort.signal)
    await sleep(300)
    collectGarbage()
    abort.abort()
    await expect(call).rejects.toThrow()
    await expect.poll(() => server.abortedCalls, { timeout: 3_000 }).toBe(1)
  })

  it('answers hand-made requests and rejects a spoofed Mcp-Name', async () => {
    const server = await closing(startSdkServer())
    const params = { name: 'get_forecast', arguments: { city: 'Oslo' } }
    const ok = await mcpPost(server.url, 'tools/call', params)
    expect(ok.status).toBe(200)
    expect(ok.response().result).toMatchObject({ resultType: 'complete' })
    const spoofed = await mcpPost(server.url, 'tools/call', params, {
      headers: { 'mcp-name': 'x' },
    })
    expect(spoofed.status).toBe(400)
    expect(spoofed.response().error?.code).toBe(-32020)
  })
})

describe('2025-era interop', () => {
  it('serves the v1 client statefully, with list_changed on the GET stream', async () => {
    const server = await closing(startLegacyV1Server())
    const client = await closing(connectLegacyClient(server.url))
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
    expect(textOf(result)).toBe('echo: hi')
    const [call] = server.calls('tools/call')
    expect(call?.header('mcp-session-id')).toMatch(/^[0-9a-f-]{36}$/)
    expect(call?.header('mcp-method')).toBeUndefined()
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve())
    })
    await expect.poll(() => server.requests.some((r) => r.method === 'GET')).toBe(true)
    server.notify.toolsChanged()
    await changed
  })

  it('lets the v1 client use a v2 server through its stateless legacy path', async () => {
    const server = await closing(startSdkServer())
    const client = await closing(connectLegacyClient(server.url))
    expect((await client.listTools()).tools).toHaveLength(SDK_SERVER_TOOLS.length)
    const result = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(result)).toBe(forecastFor('Oslo'))
    expect(server.calls('tools/call')[0]?.header('mcp-session-id')).toBeUndefined()
  })

  it('makes the v2 auto client fall back to initialize against the v1 server', async () => {
    const server = await closing(startLegacyV1Server())
    const client = await closing(connectClient(server.url))
    expect(client.getProtocolEra()).toBe('legacy')
    const result = await client.callTool({ name: 'echo', arguments: { text: 'x' } })
    expect(textOf(result)).toBe('echo: x')
  })

  it('refuses 2025 clients when legacy is reject', async () => {
    const server = await closing(startSdkServer({ legacy: 'reject' }))
    await expect(connectLegacyClient(server.url)).rejects.toThrow()
    const modern = await closing(connectClient(server.url, { pin: true }))
    expect(modern.getProtocolEra()).toBe('modern')
  })
})

describe('startNonValidatingBackend', () => {
  it('runs whatever the body names, whatever the headers say', async () => {
    const backend = await closing(startNonValidatingBackend())
    const res = await mcpPost(
      backend.url,
      'tools/call',
      { name: 'delete_repo' },
      {
        headers: { 'mcp-name': 'search' },
      },
    )
    expect(res.response().result).toMatchObject({ content: [{ text: 'ran delete_repo' }] })
    const list = await mcpPost(backend.url, 'tools/list')
    expect(list.response().result?.['tools']).toHaveLength(3)
    expect(backend.calls('tools/call')[0]?.header('mcp-name')).toBe('search')
  })

  it('resets, hangs, sends garbage, custom statuses and slow SSE on demand', async () => {
    const backend = await closing(startNonValidatingBackend())
    const post = (timeoutMs?: number) =>
      rawPost(
        backend.url,
        { jsonrpc: '2.0', id: 7, method: 'tools/list' },
        {},
        { ...(timeoutMs && { timeoutMs }) },
      )
    backend.setBehaviour(() => 'reset')
    await expect(post()).rejects.toThrow()
    backend.setBehaviour(() => 'garbage')
    await expect(post()).rejects.toThrow()
    backend.setBehaviour(() => 'hang')
    await expect(post(150)).rejects.toThrow()
    backend.setBehaviour(() => ({ status: 503, body: 'busy' }))
    expect((await post()).status).toBe(503)
    const frame = sseEvent({ jsonrpc: '2.0', id: 7, result: { tools: [] } })
    backend.setBehaviour(() => ({
      sse: [': hi\n\n', frame.slice(0, 10), frame.slice(10)],
      intervalMs: 30,
    }))
    const sse = await post()
    expect(sse.response()).toMatchObject({ id: 7, result: { tools: [] } })
    expect(backend.requests).toHaveLength(5)
  })

  it('pushes notify events on an open GET stream', async () => {
    const backend = await closing(startNonValidatingBackend())
    setTimeout(() => backend.notify.toolsChanged(), 100)
    const stream = await rawRequest('GET', backend.url, {
      headers: { accept: 'text/event-stream' },
      timeoutMs: 400,
    })
    expect(stream.truncated).toBe(true)
    expect(stream.messages()).toEqual([
      { jsonrpc: '2.0', method: 'notifications/tools/list_changed' },
    ])
  })
})

interface ListBody {
  readonly params?: { readonly cursor?: string }
}
interface CallBody {
  readonly params: { readonly inputResponses?: unknown; readonly requestState?: string }
}

/**
 * A slow_forecast call under way (wrapped: an async function would wait for it), which `signal`
 * ends by closing its connection: the v1 client's own abort keeps the connection, so a 2025-era
 * client is a raw request.
 */
async function slowCall(
  era: '2025-11-25' | '2026-07-28',
  url: string,
  signal: AbortSignal,
): Promise<{ call: Promise<unknown> }> {
  const params = { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 50 } }
  if (era === '2026-07-28')
    return { call: (await closing(connectClient(url))).callTool(params, { signal }) }
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': era,
  }
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params })
  return { call: request(url, { method: 'POST', headers, body, signal }) }
}

/** The weather tools served as the demo serves them, counting the calls that were cancelled. */
async function weatherBackend(): Promise<{
  url: string
  readonly abortedCalls: number
  close: () => Promise<void>
}> {
  let aborted = 0
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'weather', version: '1.0.0' })
      registerWeatherTools(server, { onAbort: () => void aborted++ })
      return server
    },
    { legacy: 'stateless' },
  )
  const http = await serveMcpHandler(handler)
  return {
    url: http.url,
    get abortedCalls() {
      return aborted
    },
    close: () => http.close(),
  }
}
