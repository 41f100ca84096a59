import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/client'
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio'
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server'
import { describe, expect, it, onTestFinished } from 'vitest'
import * as z from 'zod'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import { nodeServing } from '../../deploy/demo/serve.js'
import { connectClient, connectLegacyClient, encodeHeaderValue } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import {
  startRecording,
  startSdkServer,
  type RecordedRequest,
  type TestServer,
} from '../helpers/sdk-servers.js'

/*
 * SEP-2243 parameter headers through a virtual server (docs/virtual-servers.md "Parameter
 * headers"): a 2026-07-28 member refuses a `tools/call` whose `x-mcp-header` arguments are not
 * mirrored into `Mcp-Param-*` headers (400, -32020). A 2025-era client cannot send them, so the
 * gateway derives them from the member's own tool definition and the call's arguments; a
 * 2026-07-28 client sends them itself and they are forwarded.
 */

const PROXY = fileURLToPath(import.meta.resolve('mcp-remote/dist/proxy.js'))

/** The demo's weather server (get_alerts: `region` → Mcp-Param-Region) and its docs server. */
async function demoWorkspace(prefix: 'onCollision' | 'always') {
  const weather = await closing(startSdkServer({ name: 'weather' }))
  const docs = await closing(startDocsServer())
  const gw = await startTestGateway({
    servers: {
      weather: { upstreams: [{ url: weather.url }] },
      docs: { upstreams: [{ url: docs.url }] },
    },
    virtualServers: { workspace: { members: ['weather', 'docs'], prefix } },
  })
  return { weather, gw, url: gw.mcpUrl('workspace') }
}

/** Every `Mcp-Param-*` header of a recorded request, as sent: [name, value, …]. */
function paramHeaders(req: RecordedRequest | undefined): string[] {
  const raw = req?.rawHeaders ?? []
  const out: string[] = []
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]?.toLowerCase().startsWith('mcp-param-')) out.push(raw[i] ?? '', raw[i + 1] ?? '')
  return out
}

/**
 * A 2026-07-28 member (official v2 SDK) with one tool whose string, integer, boolean and nested
 * arguments are declared as parameter headers; it answers with the arguments it ran with.
 */
async function startLookupMember(): Promise<TestServer> {
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'lookup', version: '1.0.0' })
    server.registerTool(
      'lookup',
      {
        description: 'Looks a station up',
        inputSchema: z.object({
          region: z.string().meta({ 'x-mcp-header': 'Region' }),
          limit: z.number().int().meta({ 'x-mcp-header': 'Limit' }).optional(),
          exact: z.boolean().meta({ 'x-mcp-header': 'Exact' }).optional(),
          site: z.object({ code: z.string().meta({ 'x-mcp-header': 'Site-Code' }) }).optional(),
        }),
      },
      (args) => ({ content: [{ type: 'text', text: JSON.stringify(args) }] }),
    )
    return server
  })
  const node = nodeServing(handler)
  const http = await startRecording((req, res, rec) => node(req, res, rec.body))
  return {
    ...http,
    notify: handler.notify,
    async close() {
      await handler.close()
      await http.close()
    },
  }
}

describe('parameter headers through a virtual server (SEP-2243)', () => {
  it('a 2025-era client (v1 SDK) calls get_alerts: the gateway derives Mcp-Param-Region', async () => {
    const { weather, url } = await demoWorkspace('onCollision')
    const client = await closing(connectLegacyClient(url))
    const result = await client.callTool({ name: 'get_alerts', arguments: { region: 'Zürich ' } })
    expect(textOf(result)).toBe('No active alerts for Zürich ')
    const [call] = weather.calls('tools/call')
    expect(call?.header('mcp-protocol-version')).toBe('2026-07-28')
    // the declared case, the SEP-2243 encoding of a value that is not plain printable ASCII
    expect(paramHeaders(call)).toEqual(['Mcp-Param-Region', encodeHeaderValue('Zürich ')])
  })

  it('a prefix renames the tool: the member is still sent its own parameter headers', async () => {
    const { weather, url } = await demoWorkspace('always')
    const legacy = await closing(connectLegacyClient(url))
    const old = await legacy.callTool({ name: 'weather_get_alerts', arguments: { region: 'eu' } })
    expect(textOf(old)).toBe('No active alerts for eu')
    // a 2026-07-28 client mirrors the argument itself, from the virtual server's list
    const modern = await closing(connectClient(url))
    expect(modern.getProtocolEra()).toBe('modern')
    const { tools } = await modern.listTools()
    const alerts = tools.find((t) => t.name === 'weather_get_alerts')
    expect(alerts?.inputSchema.properties?.['region']).toMatchObject({ 'x-mcp-header': 'Region' })
    const now = await modern.callTool({
      name: 'weather_get_alerts',
      arguments: { region: 'Zürich' },
    })
    expect(textOf(now)).toBe('No active alerts for Zürich')
    const calls = weather.calls('tools/call')
    expect(calls.map((c) => c.header('mcp-name'))).toEqual(['get_alerts', 'get_alerts'])
    expect(calls.map(paramHeaders)).toEqual([
      ['Mcp-Param-Region', 'eu'],
      ['Mcp-Param-Region', encodeHeaderValue('Zürich')],
    ])
  })

  it('a curated name: the headers of the tool the member runs', async () => {
    const weather = await closing(startSdkServer({ name: 'weather' }))
    const docs = await closing(startDocsServer())
    const gw = await startTestGateway({
      servers: {
        weather: { upstreams: [{ url: weather.url }], tools: { get_alerts: { name: 'alerts' } } },
        docs: { upstreams: [{ url: docs.url }] },
      },
      virtualServers: { workspace: { members: ['weather', 'docs'] } },
    })
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    const result = await client.callTool({ name: 'alerts', arguments: { region: 'eu' } })
    expect(textOf(result)).toBe('No active alerts for eu')
    const [call] = weather.calls('tools/call')
    expect(call?.header('mcp-name')).toBe('get_alerts')
    expect(paramHeaders(call)).toEqual(['Mcp-Param-Region', 'eu'])
  })

  it('a 2025-era client cannot set the header: its copy is dropped, the body decides', async () => {
    const { weather, url } = await demoWorkspace('onCollision')
    const client = await closing(
      connectLegacyClient(url, { headers: { 'Mcp-Param-Region': 'us' } }),
    )
    const result = await client.callTool({ name: 'get_alerts', arguments: { region: 'eu' } })
    expect(textOf(result)).toBe('No active alerts for eu')
    // without the argument no header is sent, the client's neither: the member answers as it
    // answers any client that leaves a required argument out
    const bare = await client.callTool({ name: 'get_alerts', arguments: {} })
    expect(bare.isError).toBe(true)
    expect(weather.calls('tools/call').map(paramHeaders)).toEqual([['Mcp-Param-Region', 'eu'], []])
  })

  it('strings, integers, booleans and nested arguments; other values send no header', async () => {
    const lookup = await closing(startLookupMember())
    const docs = await closing(startDocsServer())
    const gw = await startTestGateway({
      servers: {
        lookup: { upstreams: [{ url: lookup.url }] },
        docs: { upstreams: [{ url: docs.url }] },
      },
      virtualServers: { workspace: { members: ['lookup', 'docs'], prefix: 'onCollision' } },
    })
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    const args = { region: 'north', limit: 3, exact: false, site: { code: 'ÖSL' } }
    const result = await client.callTool({ name: 'lookup', arguments: args })
    expect(JSON.parse(textOf(result))).toEqual(args)
    const [call] = lookup.calls('tools/call')
    expect(paramHeaders(call)).toEqual([
      'Mcp-Param-Region',
      'north',
      'Mcp-Param-Limit',
      '3',
      'Mcp-Param-Exact',
      'false',
      'Mcp-Param-Site-Code',
      encodeHeaderValue('ÖSL'),
    ])
    // 2.5 is no integer: no Mcp-Param-Limit, and the member refuses the call as it would refuse
    // any client's that leaves the header out
    await expect(
      client.callTool({ name: 'lookup', arguments: { region: 'north', limit: 2.5 } }),
    ).rejects.toThrow(/-32020|disagree/)
    expect(paramHeaders(lookup.calls('tools/call')[1])).toEqual(['Mcp-Param-Region', 'north'])
  })

  it('the member on its own endpoint: the 2025-era request is relayed in its own era', async () => {
    const { weather, gw } = await demoWorkspace('onCollision')
    const client = await closing(connectLegacyClient(gw.mcpUrl('weather')))
    const result = await client.callTool({ name: 'get_alerts', arguments: { region: 'eu' } })
    expect(textOf(result)).toBe('No active alerts for eu')
    const [call] = weather.calls('tools/call')
    expect(call?.header('mcp-protocol-version')).toBe('2025-11-25')
    expect(paramHeaders(call)).toEqual([])
  })

  it('mcp-remote (2025-11-25) calls get_alerts through the virtual server', async () => {
    const { weather, url } = await demoWorkspace('onCollision')
    const home = await mkdtemp(join(tmpdir(), 'mcp-remote-'))
    onTestFinished(() => rm(home, { recursive: true, force: true }))
    // its default protocol is 2025-11-25; its state goes to the temp dir; no sign-in is asked
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [PROXY, url, '--transport', 'http-only', '--protocol', 'legacy'],
      env: { PATH: process.env['PATH'] ?? '', HOME: home, MCP_REMOTE_CONFIG_DIR: home },
      stderr: 'pipe',
    })
    const stderr: string[] = []
    ;(transport.stderr as Readable).on('data', (chunk: Buffer) => stderr.push(chunk.toString()))
    const client = new Client({ name: 'desktop-app', version: '1.0.0' })
    onTestFinished(async () => {
      await client.close()
      await transport.close()
    })
    await client.connect(transport)
    const result = await client.callTool({ name: 'get_alerts', arguments: { region: 'eu' } })
    expect(textOf(result), stderr.join('')).toBe('No active alerts for eu')
    const [call] = weather.calls('tools/call')
    expect(call?.header('mcp-protocol-version')).toBe('2026-07-28')
    expect(paramHeaders(call)).toEqual(['Mcp-Param-Region', 'eu'])
  })
})
