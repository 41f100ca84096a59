import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/** docs/operations.md "Audit log": what a call's audit line says of its arguments, per mode. */
const POLICY = `
rules:
  - name: reads
    servers: ["*"]
    allow:
      tools: ["get_*"]
      prompts: [summarize]
`

const TOKEN = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'
const ARGS = { city: 'Oslo', password: 'hunter2', note: `use ${TOKEN} please` }
const MARK = /^\[redacted:[0-9a-f]{16}\]$/

function policyDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-audit-args-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  return dir
}

const audits = (gw: TestGateway) => gw.logs.filter((l) => l.audit === true)

/** The two eras a client speaks: 2026-07-28 (auto negotiation) and 2025-11-25 (v1 client). */
const ERAS = [
  ['2026-07-28, trustHeaders: false', 'modern', false],
  ['2026-07-28, trustHeaders: true', 'modern', true],
  ['2025-11-25', 'legacy', false],
] as const

type Era = (typeof ERAS)[number][1]

/** What these tests ask of either era's official client. */
interface Caller {
  callTool(req: { name: string; arguments: Record<string, unknown> }): Promise<unknown>
  getPrompt(req: { name: string; arguments: Record<string, string> }): Promise<unknown>
  listTools(): Promise<unknown>
  complete(req: {
    ref: { type: 'ref/prompt'; name: string }
    argument: { name: string; value: string }
  }): Promise<unknown>
}

async function setup(era: Era, trustHeaders: boolean, audit: Record<string, unknown> | undefined) {
  const server = await closing(startSdkServer())
  const gw = await startTestGateway(
    { ...oneServer(server.url, { trustHeaders }), policies: '.', ...(audit && { audit }) },
    { dir: policyDir() },
  )
  const url = gw.mcpUrl('app')
  const client: Caller =
    era === 'modern' ? await closing(connectClient(url)) : await closing(connectLegacyClient(url))
  return { server, gw, client }
}

describe.each(ERAS)('audit arguments through the gateway, %s', (_label, era, trustHeaders) => {
  it('none (the default): the audit line carries no arguments', async () => {
    const { gw, client } = await setup(era, trustHeaders, undefined)
    await client.callTool({ name: 'get_forecast', arguments: ARGS })
    const line = audits(gw).find((a) => a.target === 'get_forecast')
    expect(line).toMatchObject({ decision: 'allow', method: 'tools/call' })
    expect(line).not.toHaveProperty('arguments')
    expect(JSON.stringify(gw.logs)).not.toMatch(/hunter2|ghp_/)
  })

  it('redacted: credential names and shapes are markers, the rest as sent', async () => {
    const { gw, client } = await setup(era, trustHeaders, {
      arguments: 'redacted',
      redaction: { hashKey: 'an-audit-hash-key-for-tests' },
    })
    await client.callTool({ name: 'get_forecast', arguments: ARGS })
    // A denied call is audited with its arguments too.
    await expect(client.callTool({ name: 'delete_station', arguments: ARGS })).rejects.toThrow()
    await client.getPrompt({ name: 'summarize', arguments: { topic: 'caching', api_key: 'k-1' } })
    // completion/complete: the argument's name decides whether its value is redacted.
    const ref = { type: 'ref/prompt', name: 'summarize' } as const
    await client.complete({ ref, argument: { name: 'password', value: 'hunter2' } })
    await client.complete({ ref, argument: { name: 'topic', value: 'cach' } })
    const lines = audits(gw)
    const allowed = lines.find((a) => a.target === 'get_forecast')
    expect(allowed?.arguments).toEqual({
      city: 'Oslo',
      password: expect.stringMatching(MARK),
      note: expect.stringMatching(/^use \[redacted:[0-9a-f]{16}\] please$/),
    })
    const denied = lines.find((a) => a.target === 'delete_station')
    expect(denied).toMatchObject({ decision: 'deny', arguments: allowed?.arguments })
    expect(lines.find((a) => a.target === 'summarize')?.arguments).toEqual({
      topic: 'caching',
      api_key: expect.stringMatching(MARK),
    })
    const completions = lines.filter((a) => a.method === 'completion/complete')
    expect(completions.map((a) => a.arguments)).toEqual([
      { name: 'password', value: expect.stringMatching(MARK) },
      { name: 'topic', value: 'cach' },
    ])
    expect(JSON.stringify(gw.logs)).not.toMatch(/hunter2|ghp_|k-1/)
  })

  it('full: the arguments as sent, cut to maxArgumentBytes', async () => {
    const { gw, client } = await setup(era, trustHeaders, {
      arguments: 'full',
      maxArgumentBytes: 128,
    })
    await client.callTool({ name: 'get_forecast', arguments: ARGS })
    await client.callTool({ name: 'get_forecast', arguments: { city: 'x'.repeat(500) } })
    const [first, second] = audits(gw).filter((a) => a.target === 'get_forecast')
    expect(first?.arguments).toEqual(ARGS)
    expect(first).not.toHaveProperty('argumentsTruncated')
    expect(second).toMatchObject({ argumentsTruncated: true, argumentsBytes: 511 })
    expect(Buffer.byteLength(JSON.stringify(second?.arguments))).toBeLessThanOrEqual(128)
  })
})

const CLIENT_ERAS = [
  ['2026-07-28', 'modern'],
  ['2025-11-25', 'legacy'],
] as const

describe.each(CLIENT_ERAS)('audit arguments through a virtual server, %s', (_label, era) => {
  it('each member decision shows the redacted arguments, a member trusting headers too', async () => {
    // Unprefixed names and a 2026-07-28 member that trusts headers: without audit.arguments its
    // calls would be forwarded on their headers, the body unread (virtual/handle-calls.ts).
    const weather = await closing(startSdkServer({ name: 'weather' }))
    const docs = await closing(startDocsServer())
    const gw = await startTestGateway(
      {
        servers: {
          weather: { upstreams: [{ url: weather.url }], trustHeaders: true },
          docs: { upstreams: [{ url: docs.url }] },
        },
        virtualServers: { ws: { members: ['weather', 'docs'] } },
        policies: '.',
        audit: { arguments: 'redacted' },
      },
      { dir: policyDir() },
    )
    const url = gw.mcpUrl('ws')
    const client: Caller =
      era === 'modern' ? await closing(connectClient(url)) : await closing(connectLegacyClient(url))
    // Names known, so a call could be routed on its Mcp-Name alone.
    await client.listTools()
    await client.callTool({ name: 'get_forecast', arguments: ARGS })
    await expect(client.callTool({ name: 'search_docs', arguments: ARGS })).rejects.toThrow()
    const shown = {
      city: 'Oslo',
      password: expect.stringMatching(MARK),
      note: expect.stringMatching(/^use \[redacted:[0-9a-f]{16}\] please$/),
    }
    expect(audits(gw).filter((a) => a.method === 'tools/call')).toEqual([
      expect.objectContaining({ server: 'weather', decision: 'allow', arguments: shown }),
      expect.objectContaining({ server: 'docs', decision: 'deny', arguments: shown }),
    ])
    expect(JSON.stringify(gw.logs)).not.toMatch(/hunter2|ghp_/)
  })
})
