import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpPost, rawRequest } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'

describe('metrics', () => {
  it('serves Prometheus text on the admin listener only, with request counts and latency', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({ ...oneServer(backend.url, {}, 'weather'), admin: { host: '127.0.0.1', port: 0 } })
    for (let i = 0; i < 3; i++) expect((await mcpPost(gw.mcpUrl('weather'), 'tools/call', { name: 'echo' })).status).toBe(200)
    expect((await mcpPost(gw.mcpUrl('weather'), 'tools/call', { name: 'echo' }, { headers: { 'mcp-name': 'other' } })).status).toBe(400)
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).toContain('# TYPE mcp_edge_requests_total counter')
    expect(text).toContain('mcp_edge_requests_total{server="weather",method="tools/call",outcome="ok",status="200"} 3')
    expect(text).toContain('mcp_edge_requests_total{server="weather",method="tools/call",outcome="header_mismatch",status="400"} 1')
    expect(text).toContain('# TYPE mcp_edge_request_duration_seconds histogram')
    expect(text).toMatch(/mcp_edge_request_duration_seconds_bucket\{server="weather",method="tools\/call",le="\+Inf"\} 4/)
    expect(text).toMatch(/mcp_edge_request_duration_seconds_count\{server="weather",method="tools\/call"\} 4/)
    expect(text).toContain('mcp_edge_process_cpu_seconds_total')
    // SECURITY: no admin surface on the data plane (reliability S-28).
    for (const path of ['/metrics', '/admin', '/debug']) expect((await rawRequest('GET', `${gw.url}${path}`)).status).toBe(404)
  })

  it('labels unknown methods as "other", never with the raw value', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({ ...oneServer(backend.url), admin: { host: '127.0.0.1', port: 0 } })
    await mcpPost(gw.mcpUrl('app'), 'x/attacker-chosen-1')
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).not.toContain('attacker-chosen')
    expect(text).toContain('method="other"')
  })
})
