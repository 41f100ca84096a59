import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  connectClient,
  connectLegacyClient,
  mcpBody,
  mcpHeaders,
  mcpPost,
  rawPost,
} from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startSdkServer, type RecordedRequest } from '../helpers/sdk-servers.js'
import { closing } from '../helpers/lifecycle.js'

const POLICY = `
rules:
  - name: reads
    servers: [app]
    allow:
      tools: ["get_*"]
      prompts: [summarize]
      resources: ["docs://readme", "docs://pages/*"]
  - name: no-deletes
    servers: ["*"]
    deny:
      tools: ["delete_*"]
`

/** A config folder holding policies/main.yaml; removed after the test. */
function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-policy-it-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

/** What the backend was asked to run: the body's params.name / params.uri of each request. */
function namesSeen(requests: readonly RecordedRequest[]): string[] {
  return requests.map((r) => {
    const params = (
      r.json() as {
        params?: { name?: string; uri?: string; ref?: { name?: string; uri?: string } }
      }
    ).params
    return params?.name ?? params?.uri ?? params?.ref?.name ?? params?.ref?.uri ?? ''
  })
}

function audits(gw: TestGateway): Record<string, unknown>[] {
  return gw.logs.filter((l) => l.audit === true)
}

const MODES = [
  ['verifying bodies (trustHeaders: false)', false],
  ['trusting headers (trustHeaders: true)', true],
] as const

describe.each(MODES)('policies with the official client, %s', (_label, trustHeaders) => {
  async function setup(rules = POLICY, extra: Record<string, unknown> = {}) {
    const server = await closing(startSdkServer())
    const dir = policyDir(rules)
    const gw = await startTestGateway(
      { ...oneServer(server.url, { trustHeaders }), policies: '.', ...extra },
      { dir },
    )
    const client = await closing(connectClient(gw.mcpUrl('app')))
    return { server, gw, client }
  }

  it('lists exactly the allowed tools and answers a denied call as an unknown tool', async () => {
    const { server, gw, client } = await setup()
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(['get_forecast', 'get_alerts'])
    await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    for (const name of ['delete_station', 'slow_forecast', 'whoami', 'GET_forecast']) {
      await expect(client.callTool({ name, arguments: {} })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining(`Unknown tool: ${name}`),
      })
    }
    expect(namesSeen(server.calls('tools/call'))).toEqual(['get_forecast'])
    const denied = audits(gw).filter((a) => a.decision === 'deny')
    expect(denied.map((a) => [a.target, a.rule])).toEqual([
      ['delete_station', 'no-deletes'],
      ['slow_forecast', null],
      ['whoami', null],
      ['GET_forecast', null],
    ])
    expect(denied[0]).toMatchObject({
      sub: null,
      iss: null,
      server: 'app',
      method: 'tools/call',
      kind: 'tool',
      dryRun: false,
      reason: 'deny_rule',
    })
    expect(audits(gw).find((a) => a.target === 'get_forecast')).toMatchObject({
      decision: 'allow',
      rule: 'reads',
    })
    const access = gw.logs.filter((l) => l.msg === 'request' && l.method === 'tools/call')
    expect(access.map((l) => l.outcome)).toEqual([
      'ok',
      'policy_denied',
      'policy_denied',
      'policy_denied',
      'policy_denied',
    ])
  })

  it('filters prompts and refuses a denied prompt, also as a completion ref', async () => {
    const { server, client } = await setup()
    const { prompts } = await client.listPrompts()
    expect(prompts.map((p) => p.name)).toEqual(['summarize'])
    await client.getPrompt({ name: 'summarize', arguments: { topic: 'caching' } })
    await expect(client.getPrompt({ name: 'review', arguments: {} })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Unknown prompt: review'),
    })
    expect(namesSeen(server.calls('prompts/get'))).toEqual(['summarize'])
    await client.complete({
      ref: { type: 'ref/prompt', name: 'summarize' },
      argument: { name: 'topic', value: 'c' },
    })
    await expect(
      client.complete({
        ref: { type: 'ref/prompt', name: 'review' },
        argument: { name: 'x', value: 'c' },
      }),
    ).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Unknown prompt: review'),
    })
    expect(namesSeen(server.calls('completion/complete'))).toEqual(['summarize'])
  })

  it('filters resources and templates and refuses a denied read or resource completion', async () => {
    const { server, client } = await setup()
    const { resources } = await client.listResources()
    const uris = resources.map((r) => r.uri)
    expect(uris).toContain('docs://readme')
    expect(uris).toContain('docs://pages/policies') // listed pages of the template are allowed
    expect(uris).not.toContain('docs://changelog')
    expect(uris.every((u) => u === 'docs://readme' || u.startsWith('docs://pages/'))).toBe(true)
    const { resourceTemplates } = await client.listResourceTemplates()
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['docs://pages/{name}'])
    await client.readResource({ uri: 'docs://readme' })
    await client.readResource({ uri: 'docs://pages/install' })
    await expect(client.readResource({ uri: 'docs://changelog' })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Resource not found: docs://changelog'),
      data: { uri: 'docs://changelog' },
    })
    expect(namesSeen(server.calls('resources/read'))).toEqual([
      'docs://readme',
      'docs://pages/install',
    ])
    const denyTemplates = POLICY.replace('"docs://pages/*"', '"docs://readme"')
    const second = await setup(denyTemplates)
    expect((await second.client.listResourceTemplates()).resourceTemplates).toEqual([])
    await expect(
      second.client.complete({
        ref: { type: 'ref/resource', uri: 'docs://pages/{name}' },
        argument: { name: 'name', value: 'i' },
      }),
    ).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Resource not found: docs://pages/{name}'),
    })
    expect(second.server.calls('completion/complete')).toHaveLength(0)
  })

  it('refuses a listen stream that subscribes to a denied resource; the backend sees nothing', async () => {
    const { server, gw } = await setup()
    const params = {
      notifications: {
        toolsListChanged: true,
        resourceSubscriptions: ['docs://readme', 'docs://changelog'],
      },
    }
    const res = await mcpPost(gw.mcpUrl('app'), 'subscriptions/listen', params, { id: 'listen-1' })
    expect(res.status).toBe(200)
    expect(res.text).toBe(
      '{"jsonrpc":"2.0","id":"listen-1","error":{"code":-32602,"message":"Resource not found: docs://changelog","data":{"uri":"docs://changelog"}}}',
    )
    expect(server.calls('subscriptions/listen')).toHaveLength(0)
    expect(audits(gw).map((a) => [a.target, a.decision])).toEqual([
      ['docs://readme', 'allow'],
      ['docs://changelog', 'deny'],
    ])
    // an allowed subscription passes through
    const ok = await mcpPost(
      gw.mcpUrl('app'),
      'subscriptions/listen',
      { notifications: { resourceSubscriptions: ['docs://readme'] } },
      { timeoutMs: 500 },
    )
    expect(ok.status).toBe(200)
    expect(server.calls('subscriptions/listen')).toHaveLength(1)
  })

  it('answers a denial with the request id byte for byte, on HTTP 200, with nothing that names the gateway', async () => {
    const { server, gw } = await setup()
    // an id beyond 2^53, which a JSON.parse/stringify round trip would corrupt
    const body = (name: string) =>
      JSON.stringify(mcpBody('tools/call', { name, arguments: {} })).replace(
        '"id":1',
        '"id":12345678901234567890',
      )
    const res = await rawPost(
      gw.mcpUrl('app'),
      body('delete_station'),
      mcpHeaders('tools/call', 'delete_station'),
    )
    expect(res.status).toBe(200)
    expect(res.text).toBe(
      '{"jsonrpc":"2.0","id":12345678901234567890,"error":{"code":-32602,"message":"Unknown tool: delete_station"}}',
    )
    expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
    expect(res.headers['content-type']).toBe('application/json')
    // a denied tool that exists and one that does not get the same answer
    const ghost = await rawPost(
      gw.mcpUrl('app'),
      body('delete_nothing'),
      mcpHeaders('tools/call', 'delete_nothing'),
    )
    expect(ghost.text).toBe(res.text.replace('delete_station', 'delete_nothing'))
    expect(server.calls('tools/call')).toHaveLength(0)
  })

  it('dry run forwards what it would deny and audits it', async () => {
    const { server, gw, client } = await setup(POLICY, { policyMode: 'dry-run' })
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('delete_station') // nothing hidden in dry run
    await client.callTool({ name: 'delete_station', arguments: { station: 'x' } })
    expect(namesSeen(server.calls('tools/call'))).toEqual(['delete_station'])
    expect(audits(gw).at(-1)).toMatchObject({
      target: 'delete_station',
      decision: 'deny',
      dryRun: true,
      rule: 'no-deletes',
      msg: 'policy would deny (dry run)',
    })
  })
})

describe('policies and 2025-era clients', () => {
  it('judges a legacy client without headers on its body', async () => {
    const server = await closing(startSdkServer())
    const gw = await startTestGateway(
      { ...oneServer(server.url), policies: '.' },
      { dir: policyDir(POLICY) },
    )
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(['get_forecast', 'get_alerts'])
    await expect(client.callTool({ name: 'delete_station', arguments: {} })).rejects.toMatchObject({
      code: -32602,
    })
    expect(server.calls('tools/call')).toHaveLength(0)
    expect(audits(gw).at(-1)).toMatchObject({ target: 'delete_station', decision: 'deny' })
  })
})
