import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpPost, rawRequest } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'

describe('metrics', () => {
  it('serves Prometheus text on the admin listener only, with request counts and latency', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      ...oneServer(backend.url, {}, 'weather'),
      admin: { host: '127.0.0.1', port: 0 },
    })
    for (let i = 0; i < 3; i++)
      expect((await mcpPost(gw.mcpUrl('weather'), 'tools/call', { name: 'echo' })).status).toBe(200)
    expect(
      (
        await mcpPost(
          gw.mcpUrl('weather'),
          'tools/call',
          { name: 'echo' },
          { headers: { 'mcp-name': 'other' } },
        )
      ).status,
    ).toBe(400)
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).toContain('# TYPE mcp_edge_requests_total counter')
    expect(text).toContain(
      'mcp_edge_requests_total{server="weather",method="tools/call",outcome="ok",status="200"} 3',
    )
    expect(text).toContain(
      'mcp_edge_requests_total{server="weather",method="tools/call",outcome="header_mismatch",status="400"} 1',
    )
    expect(text).toContain('# TYPE mcp_edge_request_duration_seconds histogram')
    expect(text).toMatch(
      /mcp_edge_request_duration_seconds_bucket\{server="weather",method="tools\/call",le="\+Inf"\} 4/,
    )
    expect(text).toMatch(
      /mcp_edge_request_duration_seconds_count\{server="weather",method="tools\/call"\} 4/,
    )
    expect(text).toContain('mcp_edge_process_cpu_seconds_total')
    // SECURITY: no admin surface on the data plane (reliability S-28).
    for (const path of ['/metrics', '/admin', '/debug'])
      expect((await rawRequest('GET', `${gw.url}${path}`)).status).toBe(404)
  })

  it('labels unknown methods as "other", never with the raw value', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      ...oneServer(backend.url),
      admin: { host: '127.0.0.1', port: 0 },
    })
    await mcpPost(gw.mcpUrl('app'), 'x/attacker-chosen-1')
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).not.toContain('attacker-chosen')
    expect(text).toContain('method="other"')
  })

  it('counts policy decisions, with dry-run denials apart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-metrics-'))
    mkdirSync(join(dir, 'policies'))
    writeFileSync(
      join(dir, 'policies', 'main.yaml'),
      [
        'rules:',
        '  - { name: reads, servers: [app], allow: { tools: [echo, search] } }',
        '  - { name: no-search-yet, mode: dry-run, servers: [app], deny: { tools: [search] } }',
      ].join('\n'),
    )
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway(
      { ...oneServer(backend.url), policies: './policies', admin: { host: '127.0.0.1', port: 0 } },
      { dir },
    )
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'echo' })).status).toBe(200)
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'search' })).status).toBe(200)
    const denied = await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'delete_repo' })
    expect(denied.response().error?.code).toBe(-32602)
    expect(backend.calls('tools/call')).toHaveLength(2) // the denied call never reached it
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).toContain('mcp_edge_policy_decisions_total{server="app",decision="allow"} 1')
    expect(text).toContain('mcp_edge_policy_decisions_total{server="app",decision="would_deny"} 1')
    expect(text).toContain('mcp_edge_policy_decisions_total{server="app",decision="deny"} 1')
  })
})
