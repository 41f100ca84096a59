import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectClient, mcpPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { startSdkServer } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  mintedTokens,
  startJwks,
} from '../helpers/tokens.js'
import { closing } from '../helpers/lifecycle.js'

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/weather`

const POLICY = `
rules:
  - name: everyone-reads
    servers: [weather]
    allow: { tools: ["get_*"] }
  - name: admins
    when: { claims: { groups: admin } }
    servers: ["*"]
    allow: { tools: ["*"] }
  - name: no-deletes
    servers: ["*"]
    deny: { tools: ["delete_*"] }
`

describe('claim-based policies with verified tokens', () => {
  it("shows and allows what the caller's claims allow, keeps the filtered list private, audits sub and iss only", async () => {
    const key = await generateTestKey('ES256')
    const jwks = await closing(startJwks([key]))
    const server = await closing(
      startSdkServer({ cacheHints: { 'tools/list': { ttlMs: 60_000, cacheScope: 'public' } } }),
    )
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-policy-claims-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'main.yaml'), POLICY)
    const gw = await startTestGateway(
      {
        auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
        policies: '.',
        servers: { weather: { upstreams: [{ url: server.url }] } },
      },
      { dir },
    )
    const url = gw.mcpUrl('weather')
    const alice = await mintToken(claimsFor(ISS, AUD, { sub: 'alice', groups: ['eng'] }), { key })
    const root = await mintToken(claimsFor(ISS, AUD, { sub: 'root', groups: ['eng', 'admin'] }), {
      key,
    })

    const eng = await closing(connectClient(url, { auth: alice }))
    const admin = await closing(connectClient(url, { auth: root }))
    expect((await eng.listTools()).tools.map((t) => t.name)).toEqual(['get_forecast', 'get_alerts'])
    expect((await admin.listTools()).tools.map((t) => t.name)).toEqual([
      'get_forecast',
      'get_alerts',
      'slow_forecast',
      'confirm_action',
      'whoami',
    ])
    await expect(eng.callTool({ name: 'whoami', arguments: {} })).rejects.toMatchObject({
      code: -32602,
    })
    await admin.callTool({ name: 'whoami', arguments: {} })
    await expect(admin.callTool({ name: 'delete_station', arguments: {} })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Unknown tool: delete_station'),
    })
    const called = server
      .calls('tools/call')
      .map((r) => (r.json() as { params: { name: string } }).params.name)
    expect(called).toEqual(['whoami'])

    // caching.mdx: a list filtered per identity must not stay public
    const list = await mcpPost(url, 'tools/list', {}, { auth: alice })
    expect(list.response().result).toMatchObject({ cacheScope: 'private' })

    const audit = gw.logs.filter((l) => l.audit === true)
    expect(audit.find((a) => a.target === 'whoami' && a.decision === 'deny')).toMatchObject({
      sub: 'alice',
      iss: ISS,
      rule: null,
      reason: 'default_deny',
    })
    expect(audit.find((a) => a.target === 'whoami' && a.decision === 'allow')).toMatchObject({
      sub: 'root',
      rule: 'admins',
    })
    expect(audit.find((a) => a.target === 'delete_station')).toMatchObject({
      sub: 'root',
      rule: 'no-deletes',
    })
    // S-21: tokens never reach the log
    const logged = JSON.stringify(gw.logs)
    for (const t of mintedTokens) expect(logged.includes(t)).toBe(false)
  })
})
