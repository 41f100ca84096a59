import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { attrs, startReceiver } from '../helpers/otlp-receiver.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/** docs/operations.md "Request ids": one id per request on its access line, audit lines, span. */
const POLICY = `
rules:
  - name: reads
    servers: ["*"]
    allow:
      tools: ["get_*"]
`
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

function policyDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-request-id-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  return dir
}

interface Caller {
  callTool(req: { name: string; arguments: Record<string, unknown> }): Promise<unknown>
}

const ERAS = [
  ['2026-07-28', 'modern'],
  ['2025-11-25', 'legacy'],
] as const

async function connect(era: 'modern' | 'legacy', url: string): Promise<Caller> {
  // A client's own X-Request-Id is not the gateway's id: a client could name another request.
  const headers = { 'x-request-id': 'client-chosen' }
  return era === 'modern'
    ? await closing(connectClient(url, { headers }))
    : await closing(connectLegacyClient(url, { headers }))
}

const accessLines = (gw: TestGateway, method: string) =>
  gw.logs.filter((l) => l.msg === 'request' && l.method === method)
const auditLines = (gw: TestGateway, target: string) =>
  gw.logs.filter((l) => l.audit === true && l.target === target)

describe.each(ERAS)('one request id, %s', (_label, era) => {
  it('the access line, the audit line and the span of a call carry the same id', async () => {
    const server = await closing(startSdkServer())
    const receiver = await startReceiver()
    const gw = await startTestGateway(
      {
        servers: { app: { upstreams: [{ url: server.url }] } },
        policies: '.',
        telemetry: { otlp: { endpoint: `${receiver.url}/` } },
      },
      { dir: policyDir(), autoClose: false },
    )
    const client = await connect(era, gw.mcpUrl('app'))
    await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    await client.callTool({ name: 'get_forecast', arguments: { city: 'Rome' } })
    await expect(client.callTool({ name: 'delete_station', arguments: {} })).rejects.toThrow()
    await gw.close(200)

    const access = accessLines(gw, 'tools/call')
    expect(access).toHaveLength(3)
    const ids = access.map((l) => l.requestId)
    for (const id of ids) expect(id).toMatch(UUID)
    expect(new Set(ids).size).toBe(3)
    expect(access.map((l) => l.name)).toEqual(['get_forecast', 'get_forecast', 'delete_station'])
    // One audit line per decision, each under its own request's id.
    expect(auditLines(gw, 'get_forecast').map((l) => l.requestId)).toEqual([ids[0], ids[1]])
    expect(auditLines(gw, 'delete_station')).toEqual([
      expect.objectContaining({ decision: 'deny', requestId: ids[2] }),
    ])
    // Every request has one, whatever it is (lists, the 2025 handshake).
    for (const l of gw.logs.filter((x) => x.msg === 'request')) expect(l.requestId).toMatch(UUID)

    await expect
      .poll(() => receiver.spans.filter((s) => s.name.startsWith('tools/call')).length)
      .toBe(3)
    const spans = receiver.spans.filter((s) => s.name.startsWith('tools/call'))
    const spanIds = spans.map((s) => attrs(s)['mcp_edge.request.id'])
    expect(new Set(spanIds)).toEqual(new Set(ids))
    expect(JSON.stringify(gw.logs)).not.toContain('client-chosen')
  })

  it('a virtual server: each member decision is audited under the client request id', async () => {
    const weather = await closing(startSdkServer({ name: 'weather' }))
    const other = await closing(startSdkServer({ name: 'other' }))
    const gw = await startTestGateway(
      {
        servers: {
          weather: { upstreams: [{ url: weather.url }] },
          other: { upstreams: [{ url: other.url }] },
        },
        virtualServers: { ws: { members: ['weather', 'other'], prefix: 'always' } },
        policies: '.',
      },
      { dir: policyDir() },
    )
    const client = await connect(era, gw.mcpUrl('ws'))
    await client.callTool({ name: 'weather_get_forecast', arguments: { city: 'Oslo' } })
    await expect(client.callTool({ name: 'other_delete_station', arguments: {} })).rejects.toThrow()
    const access = accessLines(gw, 'tools/call')
    expect(access.map((l) => l.server)).toEqual(['ws', 'ws'])
    const [allowed, denied] = access.map((l) => l.requestId)
    expect(allowed).toMatch(UUID)
    expect(auditLines(gw, 'get_forecast')).toEqual([
      expect.objectContaining({ server: 'weather', decision: 'allow', requestId: allowed }),
    ])
    expect(auditLines(gw, 'delete_station')).toEqual([
      expect.objectContaining({ server: 'other', decision: 'deny', requestId: denied }),
    ])
  })
})
