import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { MAX_EXPORTED_CHARS } from '../../src/observability/bound.js'
import { createTracing } from '../../src/telemetry/tracing.js'
import {
  connectClient,
  connectLegacyClient,
  mcpBody,
  mcpHeaders,
  rawPost,
} from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { attrs, header, startReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js'
import { startLegacyV1Server, startSdkServer, type TestServer } from '../helpers/sdk-servers.js'

/**
 * Client-derived values leave the process bounded (docs/security.md "What the gateway owns on the
 * way out"): span names and attributes, access-log and audit lines hold at most
 * MAX_EXPORTED_CHARS of any value a client chose, the tracer's span limits are set, and a
 * client's `baggage` reaches no backend unless `telemetry.propagateBaggage` says so.
 */

const HUGE = 200_000
const ALLOW_ALL = `
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }
`

/** `value` as the one bound cuts it. */
function cut(value: string): string {
  return `${value.slice(0, MAX_EXPORTED_CHARS - 1)}…`
}

interface CallBody {
  readonly id: string
  readonly params: { readonly name: string }
}

/** Every string an exported span carries: its name, attribute and event attribute values. */
function stringsOf(span: OtlpSpan): string[] {
  const out = [span.name]
  for (const a of [span, ...(span.events ?? [])])
    for (const v of Object.values(attrs(a))) if (typeof v === 'string') out.push(v)
  return out
}

/**
 * POSTs a 2025-era request (no Mcp-Name header: the body names the target), so a name, URI or id
 * may be as long as the body allows.
 */
function legacyPost(url: string, method: string, params: Record<string, unknown>, id: string) {
  return rawPost(url, JSON.stringify({ jsonrpc: '2.0', id, method, params }), {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
  })
}

describe('client-derived values are bounded wherever they leave the process', () => {
  it('span names and attributes, access and audit lines: at most the bound, however long the value', async () => {
    const receiver = await startReceiver()
    const backend = await closing(startSdkServer())
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-exported-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'main.yaml'), ALLOW_ALL)
    const gw = await startTestGateway(
      {
        ...oneServer(backend.url, { legacyClients: 'allow' }),
        policies: '.',
        telemetry: { otlp: { endpoint: receiver.url } },
      },
      { dir, autoClose: false },
    )
    const url = gw.mcpUrl('app')
    const tool = `t${'x'.repeat(HUGE)}`
    const uri = `docs://${'u'.repeat(HUGE)}`
    const prompt = `p${'y'.repeat(HUGE)}`
    const id = `i${'d'.repeat(HUGE)}`
    // A 2026-07-28 request names its tool in Mcp-Name too: as long as a header may be.
    const modernTool = `m${'z'.repeat(12_000)}`
    const host = `h${'o'.repeat(4000)}`
    const answers = [
      await legacyPost(url, 'tools/call', { name: tool, arguments: {} }, id),
      await legacyPost(url, 'resources/read', { uri }, 'read-1'),
      await legacyPost(url, 'prompts/get', { name: prompt }, 'get-1'),
      await rawPost(url, mcpBody('tools/call', { name: modernTool, arguments: {} }, 'call-2'), {
        ...mcpHeaders('tools/call', modernTool),
        host,
      }),
    ]
    for (const a of answers) expect(a.status).toBe(200)
    // The request itself is forwarded whole: only what leaves towards logs and traces is cut.
    const calls = backend.calls('tools/call').map((r) => r.json() as CallBody)
    expect(calls.map((c) => c.params.name)).toEqual([tool, modernTool])
    expect(calls[0]?.id).toBe(id)
    expect(backend.calls('resources/read')).toHaveLength(1)
    expect(backend.calls('prompts/get')).toHaveLength(1)
    await gw.close(200)
    await expect.poll(() => receiver.spans.length).toBe(4)

    for (const span of receiver.spans)
      for (const s of stringsOf(span)) expect(s.length).toBeLessThanOrEqual(MAX_EXPORTED_CHARS)
    const [callSpan, readSpan, getSpan, modernSpan] = receiver.spans
    expect(callSpan?.name).toHaveLength(MAX_EXPORTED_CHARS)
    expect(callSpan?.name.startsWith('tools/call txxx')).toBe(true)
    expect(callSpan?.name.endsWith('x…')).toBe(true)
    expect(attrs(callSpan)).toMatchObject({
      'gen_ai.tool.name': cut(tool),
      'jsonrpc.request.id': cut(id),
    })
    expect(attrs(readSpan)['mcp.resource.uri']).toBe(cut(uri))
    expect(getSpan?.name).toBe(cut(`prompts/get ${prompt}`))
    expect(attrs(getSpan)['gen_ai.prompt.name']).toBe(cut(prompt))
    expect(modernSpan?.name).toBe(cut(`tools/call ${modernTool}`))
    expect(attrs(modernSpan)).toMatchObject({
      'gen_ai.tool.name': cut(modernTool),
      'mcp.protocol.version': '2026-07-28',
      'server.address': cut(host),
    })

    const requests = gw.logs.filter((l) => l['msg'] === 'request')
    const audits = gw.logs.filter((l) => l['audit'] === true)
    expect(requests).toHaveLength(4)
    expect(audits).toHaveLength(4)
    for (const line of [...requests, ...audits])
      for (const v of Object.values(line))
        if (typeof v === 'string') expect(v.length).toBeLessThanOrEqual(MAX_EXPORTED_CHARS)
    expect(requests.map((l) => l['name'])).toEqual([
      cut(tool),
      cut(uri),
      cut(prompt),
      cut(modernTool),
    ])
    for (const a of audits) expect(a).toMatchObject({ truncated: true, decision: 'allow' })
  })

  it("the tracer's span limits hold a value or count that reaches the SDK directly", async () => {
    const receiver = await startReceiver()
    const tracing = createTracing({
      otlp: { endpoint: receiver.url, headers: {} },
      sampleRatio: 1,
      serviceName: 'limits-under-test',
      propagateBaggage: false,
    })
    const span = tracing.tracer.startSpan('limits', {
      attributes: { big: 'b'.repeat(HUGE), list: ['l'.repeat(HUGE)] },
    })
    for (let i = 0; i < 100; i++) span.setAttribute(`a${i}`, i)
    for (let i = 0; i < 300; i++) span.addEvent(`e${i}`, { v: 'v'.repeat(HUGE), n: i })
    span.addLink({ context: span.spanContext() })
    span.end()
    await tracing.shutdown()
    await expect.poll(() => receiver.spans.length).toBe(1)
    const exported = receiver.spans[0] as OtlpSpan & {
      links?: unknown[]
      droppedAttributesCount?: number
      droppedEventsCount?: number
    }
    const values = attrs(exported)
    expect(String(values['big'])).toHaveLength(MAX_EXPORTED_CHARS)
    expect(exported.attributes.length).toBeLessThanOrEqual(64)
    expect(exported.droppedAttributesCount).toBeGreaterThan(0)
    expect(exported.events?.length).toBeLessThanOrEqual(128)
    expect(exported.droppedEventsCount).toBeGreaterThan(0)
    for (const e of exported.events ?? [])
      expect(String(attrs(e)['v']).length).toBeLessThanOrEqual(MAX_EXPORTED_CHARS)
    expect(exported.links ?? []).toHaveLength(0)
  })
})

/** What a backend that reads identity from baggage would believe. */
const BAGGAGE = 'user.id=admin,role=root'

/** The `baggage` headers of every request a backend got. */
function baggageSeen(server: TestServer): string[][] {
  return server.requests.map((r) => header(r.rawHeaders, 'baggage'))
}

async function bothEras(telemetry: Record<string, unknown> | undefined) {
  const modern = await closing(startSdkServer())
  const legacy = await closing(startLegacyV1Server())
  const gw = await startTestGateway({
    servers: {
      modern: { upstreams: [{ url: modern.url }] },
      legacy: { upstreams: [{ url: legacy.url }], legacyClients: 'allow' },
      // A configured baggage: the operator's own, sent as configured unless the client's is passed on.
      tagged: { upstreams: [{ url: modern.url }], headers: { baggage: 'deployment=edge' } },
    },
    ...(telemetry && { telemetry }),
  })
  const headers = { baggage: BAGGAGE }
  const client = await closing(connectClient(gw.mcpUrl('modern'), { pin: true, headers }))
  await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
  const v1 = await closing(connectLegacyClient(gw.mcpUrl('legacy'), { headers }))
  await v1.callTool({ name: 'echo', arguments: { text: 'hi' } })
  const raw = await rawPost(gw.mcpUrl('tagged'), mcpBody('tools/list', {}, 1), {
    ...mcpHeaders('tools/list'),
    Baggage: BAGGAGE,
  })
  expect(raw.status).toBe(200)
  expect(modern.requests.length).toBeGreaterThanOrEqual(2)
  expect(legacy.requests.length).toBeGreaterThanOrEqual(2)
  return { modern, legacy }
}

describe("a client's baggage reaches backends only with telemetry.propagateBaggage", () => {
  it('is dropped at the edge by default, for 2026-07-28 and 2025-era backends alike', async () => {
    const { modern, legacy } = await bothEras(undefined)
    for (const seen of baggageSeen(legacy)) expect(seen).toEqual([])
    for (const r of modern.calls('tools/call')) expect(header(r.rawHeaders, 'baggage')).toEqual([])
    // The configured value, never joined with or replaced by the client's.
    const tagged = modern.calls('tools/list')
    expect(tagged).toHaveLength(1)
    expect(header(tagged[0]?.rawHeaders ?? [], 'baggage')).toEqual(['deployment=edge'])
  })

  it('is dropped with telemetry on and the flag off', async () => {
    const receiver = await startReceiver()
    const { modern, legacy } = await bothEras({ otlp: { endpoint: receiver.url } })
    for (const r of [...modern.calls('tools/call'), ...legacy.requests])
      expect(header(r.rawHeaders, 'baggage')).toEqual([])
    for (const r of modern.calls('tools/call'))
      expect(header(r.rawHeaders, 'traceparent')).toHaveLength(1)
  })

  it('is passed on, re-encoded by the W3C propagator, with propagateBaggage: true', async () => {
    const receiver = await startReceiver()
    const { modern, legacy } = await bothEras({
      otlp: { endpoint: receiver.url },
      propagateBaggage: true,
    })
    const calls = [...modern.calls('tools/call'), ...legacy.calls('tools/call')]
    expect(calls).toHaveLength(2)
    for (const r of calls) expect(header(r.rawHeaders, 'baggage')).toEqual([BAGGAGE])
    // Every request of the 2025-era session carries it (initialize, the call, its notifications).
    for (const seen of baggageSeen(legacy).filter((s) => s.length > 0))
      expect(seen).toEqual([BAGGAGE])
    // One baggage header: the client's takes the configured one's place.
    for (const r of modern.calls('tools/list'))
      expect(header(r.rawHeaders, 'baggage')).toEqual([BAGGAGE])
  })
})
