import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectClient, connectLegacyClient, mcpPost, rawRequest } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { attrs, header, startReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js'
import { startRecordingBackend } from '../helpers/recording-backend.js'
import { startLegacyV1Server, startSdkServer } from '../helpers/sdk-servers.js'

const META_TRACE = '0af7651916cd43dd8448eb211c80319c'
const META_PARENT = 'b7ad6b7169203331'
const HEADER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const HEADER_PARENT = '00f067aa0ba902b7'

describe('OpenTelemetry traces', () => {
  it('exports one server span per request, parented by _meta.traceparent, and passes context on', async () => {
    const receiver = await startReceiver()
    const backend = await startRecordingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway(
      {
        ...oneServer(backend.origin),
        telemetry: {
          otlp: { endpoint: `${receiver.url}/`, headers: { 'x-collector-key': 'k1' } },
          serviceName: 'edge-under-test',
        },
      },
      { autoClose: false },
    )
    const url = gw.mcpUrl('app')
    const metaParent = `00-${META_TRACE}-${META_PARENT}-01`
    const headerParent = `00-${HEADER_TRACE}-${HEADER_PARENT}-01`
    // _meta wins over the header: it is the MCP-level context (OTel MCP conventions).
    const both = await mcpPost(
      url,
      'tools/call',
      { name: 'get_weather', _meta: { traceparent: metaParent, tracestate: 'vendor=1' } },
      { id: 'call-1', headers: { traceparent: headerParent } },
    )
    expect(both.status).toBe(200)
    const headerOnly = await mcpPost(
      url,
      'tools/list',
      {},
      { id: 7, headers: { traceparent: headerParent } },
    )
    expect(headerOnly.status).toBe(200)
    const refused = await mcpPost(
      url,
      'tools/call',
      { name: 'get_weather' },
      { id: 9, headers: { 'mcp-name': 'other_tool', traceparent: headerParent } },
    )
    expect(refused.status).toBe(400)
    expect(refused.json()).toMatchObject({ id: 9, error: { data: { reason: 'header_mismatch' } } })
    expect(backend.requests).toHaveLength(2)
    // Closing flushes the batch processor: nothing is lost on shutdown.
    await gw.close(200)
    await expect.poll(() => receiver.spans.length).toBe(3)

    expect(receiver.posts[0]?.url).toBe('/v1/traces')
    expect(receiver.posts[0]?.headers['x-collector-key']).toBe('k1')
    const [call, list, bad] = receiver.spans
    expect(call?.name).toBe('tools/call get_weather')
    expect(call?.kind).toBe(2) // SPAN_KIND_SERVER
    expect(call?.traceId).toBe(META_TRACE)
    expect(call?.parentSpanId).toBe(META_PARENT)
    expect(attrs(call)).toMatchObject({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'get_weather',
      'gen_ai.operation.name': 'execute_tool',
      'mcp.protocol.version': '2026-07-28',
      'jsonrpc.request.id': 'call-1',
      'network.transport': 'tcp',
      'network.protocol.name': 'http',
      'server.address': '127.0.0.1',
      'server.port': gw.port,
      'client.address': '127.0.0.1',
      'http.response.status_code': 200,
    })
    expect(attrs(call)['error.type']).toBeUndefined()
    const attempt = call?.events?.find((e) => e.name === 'mcp_edge.upstream.attempt')
    expect(attrs(attempt as OtlpSpan)).toMatchObject({ retry: 0 })

    // The backend gets the gateway's span as parent in the W3C header and in `_meta`, the
    // caller's tracestate with it in both places.
    const [first, second] = backend.requests
    const gatewayParent = `00-${META_TRACE}-${call?.spanId}-01`
    expect(header(first?.rawHeaders ?? [], 'traceparent')).toEqual([gatewayParent])
    expect(header(first?.rawHeaders ?? [], 'tracestate')).toEqual(['vendor=1'])
    expect(first?.body.toString('utf8')).toContain(
      `"traceparent":"${gatewayParent}","tracestate":"vendor=1"`,
    )
    expect(first?.body.toString('utf8')).not.toContain(metaParent)

    expect(list?.name).toBe('tools/list')
    expect(list?.traceId).toBe(HEADER_TRACE)
    expect(list?.parentSpanId).toBe(HEADER_PARENT)
    expect(attrs(list)).toMatchObject({ 'jsonrpc.request.id': '7' })
    expect(header(second?.rawHeaders ?? [], 'traceparent')).toEqual([
      `00-${HEADER_TRACE}-${list?.spanId}-01`,
    ])

    expect(bad?.traceId).toBe(HEADER_TRACE)
    expect(attrs(bad)).toMatchObject({
      'error.type': 'header_mismatch',
      'rpc.response.status_code': '-32020',
      'http.response.status_code': 400,
    })
    expect(bad?.status?.code).toBe(2) // STATUS_CODE_ERROR
  })

  it('traces and measures a 2025-era SDK v1 client: session id, _meta parent, tool label', async () => {
    const receiver = await startReceiver()
    const backend = await startLegacyV1Server()
    onTestFinished(() => backend.close())
    // Tool names are learnt from tools/list answers the gateway reads anyway: here the policy
    // filter (2025-era lists are not cached).
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-telemetry-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(
      join(dir, 'main.yaml'),
      'rules:\n  - name: all\n    servers: [app]\n    allow: { tools: ["*"] }\n',
    )
    const gw = await startTestGateway(
      {
        ...oneServer(backend.url, { legacyClients: 'allow' }),
        policies: '.',
        admin: { host: '127.0.0.1', port: 0 },
        telemetry: { otlp: { endpoint: receiver.url } },
      },
      { autoClose: false, dir },
    )
    const client = await connectLegacyClient(gw.mcpUrl('app'))
    await client.listTools()
    const parent = `00-${META_TRACE}-${META_PARENT}-01`
    const result = await client.callTool({
      name: 'echo',
      arguments: { text: 'hi' },
      _meta: { traceparent: parent },
    })
    expect(result.content).toEqual([{ type: 'text', text: 'echo: hi' }])
    const metrics = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(metrics).toMatch(
      /mcp_server_operation_duration_seconds_count\{mcp_method_name="tools\/call",gen_ai_tool_name="echo",mcp_protocol_version="2025-[0-9-]+",mcp_edge_server="app"\} 1/,
    )
    await client.close()
    await gw.close(200)
    await expect.poll(() => receiver.spans.find((s) => s.name === 'tools/call echo')).toBeDefined()
    const call = receiver.spans.find((s) => s.name === 'tools/call echo')
    expect(call?.traceId).toBe(META_TRACE)
    expect(call?.parentSpanId).toBe(META_PARENT)
    expect(attrs(call)['mcp.session.id']).toEqual(expect.any(String))
    expect(attrs(call)['mcp.protocol.version']).toMatch(/^2025-/)
    // The backend's session id never leaves the gateway: the span has the client's handle.
    const backendIds = backend.requests.map((r) => r.header('mcp-session-id'))
    expect(backendIds).not.toContain(attrs(call)['mcp.session.id'])
  })

  it('names MCP operations in /metrics per the conventions, tool names from the listed catalog', async () => {
    const backend = await startSdkServer()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      ...oneServer(backend.url),
      cache: {}, // tool names are learnt from tools/list answers the gateway reads anyway
      admin: { host: '127.0.0.1', port: 0 },
    })
    const client = await connectClient(gw.mcpUrl('app'))
    onTestFinished(() => client.close())
    await client.listTools()
    await client.callTool({ name: 'get_forecast', arguments: { city: 'Paris' } })
    // A name the backend never listed: the label is `other`, whatever the client wrote.
    await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'made_up_1234', arguments: {} })
    const text = (await rawRequest('GET', `http://127.0.0.1:${gw.adminPort}/metrics`)).text
    expect(text).toContain('# TYPE mcp_server_operation_duration_seconds histogram')
    expect(text).toMatch(
      /mcp_server_operation_duration_seconds_count\{mcp_method_name="tools\/call",gen_ai_tool_name="get_forecast",mcp_protocol_version="2026-07-28",mcp_edge_server="app"\} 1/,
    )
    expect(text).toMatch(
      /mcp_server_operation_duration_seconds_count\{mcp_method_name="tools\/call",gen_ai_tool_name="other",mcp_protocol_version="2026-07-28",mcp_edge_server="app"\} 1/,
    )
    expect(text).toMatch(
      /mcp_server_operation_duration_seconds_bucket\{mcp_method_name="tools\/list",mcp_protocol_version="2026-07-28",mcp_edge_server="app",le="\+Inf"\} 1/,
    )
    expect(text).not.toContain('made_up_1234')

    // Every metric the shipped Grafana dashboard queries exists in this output.
    const dashboard = JSON.parse(readFileSync('deploy/grafana/mcp-edge.json', 'utf8')) as {
      panels: { targets?: { expr: string }[] }[]
    }
    const exprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr)
    expect(exprs.length).toBeGreaterThan(3)
    // Metric names only: label matchers `{…}` and `by (…)` label lists are taken out first.
    const bare = exprs.map((e) => e.replace(/\{[^}]*\}/g, '').replace(/\bby \([^)]*\)/g, ''))
    const queried = new Set(bare.flatMap((e) => e.match(/\bmcp_[a-z0-9_]+\b/g) ?? []))
    expect(queried.size).toBeGreaterThan(3)
    for (const name of queried) {
      const base = name.replace(/_(bucket|sum|count)$/, '')
      expect(text, name).toContain(`# TYPE ${base} `)
    }
  })
})
