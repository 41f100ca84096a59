import { createServer } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { forecastFor } from '../../deploy/demo/weather-server.js'
import {
  connectClient,
  connectLegacyClient,
  mcpHeaders,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { attrs, header, startReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js'
import { startRecordingBackend, type ReceivedRequest } from '../helpers/recording-backend.js'
import {
  startLegacyV1Server,
  startSdkServer,
  type RecordedRequest,
} from '../helpers/sdk-servers.js'

/**
 * Trace context reaches the backend in both places MCP carries it (docs/operations.md "Context:
 * in and out"): the W3C headers and `params._meta`, naming the gateway's span, spliced into the
 * judged body without changing any other byte.
 */

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c'
const CLIENT_SPAN = 'b7ad6b7169203331'
const HEADER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const HEADER_SPAN = '00f067aa0ba902b7'
const V1_TRACE = '5d2a0c3e9b8f4a6e8c1d7b3f2e9a4c6b'
const CLIENT_PARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`
const HEADER_PARENT = `00-${HEADER_TRACE}-${HEADER_SPAN}-01`
const V1_PARENT = `00-${V1_TRACE}-${HEADER_SPAN}-01`

const MODERN_META =
  '"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}'

/** POSTs these exact bytes as a 2026-07-28 client would, with extra headers. */
function post(
  url: string,
  text: string,
  method: string,
  name: string | undefined,
  extra: Record<string, string> = {},
): Promise<RawResponse> {
  return rawPost(url, text, { ...mcpHeaders(method, name), ...extra })
}

/** Exported spans, once the gateway has closed (which flushes them). */
async function spansAfterClose(
  gw: TestGateway,
  receiver: Awaited<ReturnType<typeof startReceiver>>,
  count: number,
): Promise<OtlpSpan[]> {
  await gw.close(200)
  await expect.poll(() => receiver.spans.length).toBeGreaterThanOrEqual(count)
  return receiver.spans
}

function span(spans: readonly OtlpSpan[], name: string): OtlpSpan {
  const found = spans.find((s) => s.name === name)
  expect(found, name).toBeDefined()
  return found as OtlpSpan
}

function metaOf(req: RecordedRequest | ReceivedRequest | undefined): Record<string, unknown> {
  const body = JSON.parse(req?.body.toString('utf8') ?? '{}') as {
    params?: { _meta?: Record<string, unknown> }
  }
  return body.params?._meta ?? {}
}

function traceIdOf(traceparent: unknown): string | undefined {
  return typeof traceparent === 'string' ? traceparent.split('-')[1] : undefined
}

describe('trace context in the body, raw bytes at a recording backend', () => {
  it('splices the gateway span into params._meta, changing no other byte', async () => {
    const receiver = await startReceiver()
    const backend = await startRecordingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway(
      {
        servers: {
          app: { upstreams: [{ url: `${backend.origin}/app` }] },
          trusted: { upstreams: [{ url: `${backend.origin}/trusted` }], trustHeaders: true },
        },
        telemetry: { otlp: { endpoint: receiver.url } },
      },
      { autoClose: false },
    )
    const app = gw.mcpUrl('app')
    // 1. `_meta` only (no header): the parent, and replaced in place; tracestate kept.
    const metaOnly = `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"get_weather","arguments":{"q":"météo \\u00e9","n":1.50},"_meta":{${MODERN_META},"traceparent":"${CLIENT_PARENT}","tracestate":"vendor=1"}}}`
    expect((await post(app, metaOnly, 'tools/call', 'get_weather')).status).toBe(200)
    // 2. A malformed `_meta.traceparent` and a valid header: the header is the parent, and the
    // malformed value is replaced, never forwarded.
    const malformed = `{"jsonrpc":"2.0","id":"m","method":"tools/call","params":{"name":"get_weather","_meta":{"traceparent":"00-zz-not-a-trace","tracestate":"bad=1",${MODERN_META}}}}`
    const res2 = await post(app, malformed, 'tools/call', 'get_weather', {
      traceparent: HEADER_PARENT,
    })
    expect(res2.status).toBe(200)
    // 3. No `_meta` at all: one is inserted first in params.
    const noMeta = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params": {"name":"get_weather","arguments":{}}}`
    expect((await post(app, noMeta, 'tools/call', 'get_weather')).status).toBe(200)
    // 4. A notification: forwarded byte for byte, `_meta.traceparent` included.
    const note = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"_meta":{"traceparent":"${CLIENT_PARENT}"}}}`
    const res4 = await post(app, note, 'notifications/cancelled', undefined)
    expect(res4.status).toBe(202)
    // 5. trustHeaders: the body is not parsed to judge it, so only the header carries the span.
    const trusted = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_weather","_meta":{"traceparent":"${CLIENT_PARENT}"}}}`
    expect((await post(gw.mcpUrl('trusted'), trusted, 'tools/call', 'get_weather')).status).toBe(
      200,
    )
    expect(backend.requests).toHaveLength(5)
    const spans = await spansAfterClose(gw, receiver, 5)
    const [s1, s2, s3, , s5] = spans
    const [r1, r2, r3, r4, r5] = backend.requests

    expect(s1?.traceId).toBe(CLIENT_TRACE)
    expect(s1?.parentSpanId).toBe(CLIENT_SPAN)
    const ours1 = `00-${CLIENT_TRACE}-${s1?.spanId}-01`
    expect(r1?.body.toString('utf8')).toBe(metaOnly.replace(CLIENT_PARENT, ours1))
    expect(header(r1?.rawHeaders ?? [], 'traceparent')).toEqual([ours1])
    expect(header(r1?.rawHeaders ?? [], 'tracestate')).toEqual(['vendor=1'])
    expect(header(r1?.rawHeaders ?? [], 'content-length')).toEqual([String(r1?.body.length)])

    expect(s2?.traceId).toBe(HEADER_TRACE)
    expect(s2?.parentSpanId).toBe(HEADER_SPAN)
    const ours2 = `00-${HEADER_TRACE}-${s2?.spanId}-01`
    // The client's tracestate went with its malformed traceparent; the header had none.
    expect(r2?.body.toString('utf8')).toBe(
      malformed.replace('"00-zz-not-a-trace","tracestate":"bad=1"', `"${ours2}"`),
    )
    expect(header(r2?.rawHeaders ?? [], 'traceparent')).toEqual([ours2])

    const ours3 = `00-${s3?.traceId}-${s3?.spanId}-01`
    expect(s3?.parentSpanId).toBeUndefined()
    expect(r3?.body.toString('utf8')).toBe(
      noMeta.replace('"params": {', `"params": {"_meta":{"traceparent":"${ours3}"},`),
    )

    expect(r4?.body.toString('utf8')).toBe(note)
    expect(r5?.body.toString('utf8')).toBe(trusted)
    expect(s5?.traceId).toBe(CLIENT_TRACE) // read for the parent, not rewritten
    expect(header(r5?.rawHeaders ?? [], 'traceparent')).toEqual([
      `00-${CLIENT_TRACE}-${s5?.spanId}-01`,
    ])
  })

  it('without telemetry, the backend gets the client body and trace headers byte for byte', async () => {
    const backend = await startRecordingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway(oneServer(backend.origin))
    const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather","_meta":{"traceparent":"00-zz","tracestate":"a=1"}}}`
    const res = await post(gw.mcpUrl('app'), text, 'tools/call', 'get_weather', {
      traceparent: HEADER_PARENT,
      tracestate: 'h=2',
    })
    expect(res.status).toBe(200)
    expect(backend.requests[0]?.body.toString('utf8')).toBe(text)
    expect(header(backend.requests[0]?.rawHeaders ?? [], 'traceparent')).toEqual([HEADER_PARENT])
    expect(header(backend.requests[0]?.rawHeaders ?? [], 'tracestate')).toEqual(['h=2'])
  })
})

describe('trace context in the body, official SDK servers and clients', () => {
  it('v2 client (auto): the SDK server reads the gateway span in _meta; _meta wins over the header', async () => {
    const receiver = await startReceiver()
    const backend = await closing(startSdkServer())
    const gw = await startTestGateway(
      { ...oneServer(backend.url), telemetry: { otlp: { endpoint: receiver.url } } },
      { autoClose: false },
    )
    const client = await connectClient(gw.mcpUrl('app'), {
      headers: { traceparent: HEADER_PARENT },
    })
    const result = await client.callTool({
      name: 'get_forecast',
      arguments: { city: 'Oslo' },
      _meta: { traceparent: CLIENT_PARENT, tracestate: 'vendor=1' },
    })
    expect(textOf(result)).toBe(forecastFor('Oslo'))
    await client.close()
    const call = span(await spansAfterClose(gw, receiver, 1), 'tools/call get_forecast')
    expect(call.traceId).toBe(CLIENT_TRACE)
    expect(call.parentSpanId).toBe(CLIENT_SPAN)
    const got = backend.calls('tools/call')[0]
    const ours = `00-${CLIENT_TRACE}-${call.spanId}-01`
    expect(metaOf(got)).toMatchObject({ traceparent: ours, tracestate: 'vendor=1' })
    expect(metaOf(got)['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28')
    expect(got?.header('traceparent')).toBe(ours)
  })

  it('v1 client: a body without _meta gets one, the 2025-era SDK server serves it, notifications pass', async () => {
    const receiver = await startReceiver()
    const backend = await closing(startLegacyV1Server())
    const gw = await startTestGateway(
      {
        ...oneServer(backend.url, { legacyClients: 'allow' }),
        telemetry: { otlp: { endpoint: receiver.url } },
      },
      { autoClose: false },
    )
    const client = await connectLegacyClient(gw.mcpUrl('app'), {
      headers: { traceparent: HEADER_PARENT },
    })
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo')
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
    expect(result.content).toEqual([{ type: 'text', text: 'echo: hi' }])
    await client.close()
    const call = span(await spansAfterClose(gw, receiver, 3), 'tools/call echo')
    expect(call.traceId).toBe(HEADER_TRACE)
    const got = backend.calls('tools/call')[0]
    const sent = JSON.parse(got?.body.toString('utf8') ?? '{}') as {
      params: { _meta: Record<string, unknown>; arguments: unknown }
    }
    expect(sent.params._meta).toEqual({ traceparent: `00-${HEADER_TRACE}-${call.spanId}-01` })
    expect(sent.params.arguments).toEqual({ text: 'hi' })
    const initialized = backend.calls('notifications/initialized')[0]
    expect(initialized?.body.toString('utf8')).not.toContain('traceparent')
  })
})

describe('trace context on virtual server member requests', () => {
  it('members get the gateway span (header and _meta); fan-outs and routed calls are on the span', async () => {
    const receiver = await startReceiver()
    const one = await closing(startSdkServer({ name: 'one' }))
    const old = await closing(startLegacyV1Server())
    const gw = await startTestGateway(
      {
        legacySessions: { key: 'a-test-key-of-at-least-16-chars' },
        servers: {
          one: { upstreams: [{ url: one.url }] },
          old: { upstreams: [{ url: old.url }] },
        },
        virtualServers: { ws: { members: ['one', 'old'] } },
        telemetry: { otlp: { endpoint: receiver.url } },
      },
      { autoClose: false },
    )
    const client = await connectClient(gw.mcpUrl('ws'), {
      headers: { traceparent: HEADER_PARENT },
    })
    const names = (await client.listTools()).tools.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['get_forecast', 'echo']))
    const forecast = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(forecast)).toBe(forecastFor('Oslo'))
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
    expect(textOf(echo)).toBe('echo: hi')
    await client.close()
    // The 2025-era client: its own trace, through the gateway's session.
    const v1 = await connectLegacyClient(gw.mcpUrl('ws'), { headers: { traceparent: V1_PARENT } })
    const v1Result = await v1.callTool({ name: 'get_forecast', arguments: { city: 'Bergen' } })
    expect(v1Result.content).toEqual([{ type: 'text', text: forecastFor('Bergen') }])
    await v1.close()
    const spans = await spansAfterClose(gw, receiver, 5)

    const list = span(spans, 'tools/list')
    const members = (list.events ?? [])
      .filter((e) => e.name === 'mcp_edge.virtual.member')
      .map((e) => attrs(e))
    expect(members).toEqual(
      expect.arrayContaining([
        { 'mcp_edge.member': 'one', 'mcp.method.name': 'tools/list', outcome: 'ok' },
        { 'mcp_edge.member': 'old', 'mcp.method.name': 'tools/list', outcome: 'ok' },
      ]),
    )
    for (const req of [...one.calls('tools/list'), ...old.calls('tools/list')]) {
      expect(traceIdOf(req.header('traceparent'))).toBe(HEADER_TRACE)
      expect(req.header('traceparent')?.split('-')[2]).not.toBe(HEADER_SPAN)
    }

    const calls = spans.filter((s) => s.name === 'tools/call get_forecast')
    const call = calls.find((s) => s.traceId === HEADER_TRACE) as OtlpSpan
    const attempt = call.events?.find((e) => e.name === 'mcp_edge.upstream.attempt')
    expect(attrs(attempt)).toEqual({ 'mcp_edge.upstream.id': 'one#0', retry: 0 })
    const [toOne, fromV1] = one.calls('tools/call')
    const ours = `00-${HEADER_TRACE}-${call.spanId}-01`
    expect(toOne?.header('traceparent')).toBe(ours)
    expect(metaOf(toOne)['traceparent']).toBe(ours)

    const echoSpan = span(spans, 'tools/call echo')
    const echoAttempts = (echoSpan.events ?? []).filter(
      (e) => e.name === 'mcp_edge.upstream.attempt',
    )
    expect(echoAttempts.map((e) => attrs(e)['mcp_edge.upstream.id'])).toContain('old#0')
    const toOld = old.calls('tools/call')[0]
    const oursEcho = `00-${HEADER_TRACE}-${echoSpan.spanId}-01`
    expect(toOld?.header('traceparent')).toBe(oursEcho)
    expect(metaOf(toOld)['traceparent']).toBe(oursEcho)

    const v1Call = calls.find((s) => s.traceId === V1_TRACE) as OtlpSpan
    expect(v1Call).toBeDefined()
    const oursV1 = `00-${V1_TRACE}-${v1Call.spanId}-01`
    expect(fromV1?.header('traceparent')).toBe(oursV1)
    expect(metaOf(fromV1)['traceparent']).toBe(oursV1)
  })

  it('records a member left out of a fan-out with why: timeout, or the reason code', async () => {
    const receiver = await startReceiver()
    const one = await closing(startSdkServer({ name: 'one' }))
    // A member that accepts the connection and never answers, and one with nobody listening.
    const sockets = new Set<Socket>()
    const hung = createServer(() => undefined)
    hung.on('connection', (s) => sockets.add(s))
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => {
      for (const s of sockets) s.destroy()
      return new Promise<void>((resolve) => hung.close(() => resolve()))
    })
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const closedPort = (closed.address() as AddressInfo).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const gw = await startTestGateway(
      {
        servers: {
          one: { upstreams: [{ url: one.url }] },
          hung: {
            upstreams: [{ url: `http://127.0.0.1:${(hung.address() as AddressInfo).port}/mcp` }],
          },
          gone: { upstreams: [{ url: `http://127.0.0.1:${closedPort}/mcp` }] },
        },
        virtualServers: { ws: { members: ['one', 'hung', 'gone'], fanOutTimeoutMs: 1500 } },
        telemetry: { otlp: { endpoint: receiver.url } },
      },
      { autoClose: false },
    )
    const res = await rawPost(
      gw.mcpUrl('ws'),
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: {} } }),
      mcpHeaders('tools/list'),
    )
    expect(res.status).toBe(200)
    const list = span(await spansAfterClose(gw, receiver, 1), 'tools/list')
    const outcomes = Object.fromEntries(
      (list.events ?? [])
        .filter((e) => e.name === 'mcp_edge.virtual.member')
        .map((e) => [attrs(e)['mcp_edge.member'], attrs(e)['outcome']]),
    )
    expect(outcomes).toMatchObject({ one: 'ok', hung: 'timeout' })
    // Refused connections: the reason code of the member's attempt loop (README error table).
    expect(['upstream_unavailable', 'no_upstream']).toContain(outcomes['gone'])
  })
})
