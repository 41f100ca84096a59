import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import {
  connectClient,
  connectLegacyClient,
  mcpBody,
  mcpHeaders,
  mcpPost,
} from '../helpers/clients.js'
import { adminUrl, oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startLegacyV1Server, startSdkServer } from '../helpers/sdk-servers.js'

/**
 * Deadlines per method, per tool and per prompt (docs/balancing.md "Deadlines"): in front of the
 * official SDK's server, whose `slow_forecast` takes steps × 150 ms (with progress when asked) and
 * counts the calls it saw cancelled.
 */

const DEADLINE_MS = 1000
/**
 * How long after the deadline a cancelled call may take to show at the backend (a loaded CI
 * machine): the slow calls here take 40 or 100 steps of 150 ms (6 or 15 s), and a call left to end
 * never counts as aborted, so the margin cannot let an uncancelled call pass.
 */
const CANCEL_MARGIN_MS = 3000

/** A slow_forecast call of `steps` (150 ms each), with progress (an SSE answer) when `progress`. */
function slowCall(url: string, id: string, steps: number, progress: boolean) {
  const params = {
    name: 'slow_forecast',
    arguments: { city: 'Oslo', steps },
    ...(progress && { _meta: { progressToken: id } }),
  }
  return request(url, {
    method: 'POST',
    headers: mcpHeaders('tools/call', 'slow_forecast'),
    body: JSON.stringify(mcpBody('tools/call', params, id)),
  })
}

/** The `data:` payloads of an SSE body, parsed. */
function sseMessages(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .flatMap((event) => event.split('\n').filter((l) => l.startsWith('data: ')))
    .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>)
}

async function metricsText(gw: Parameters<typeof adminUrl>[0]): Promise<string> {
  const res = await request(`${adminUrl(gw)}/metrics`)
  return res.body.text()
}

describe('a per-tool deadline before the response head', () => {
  it('cancels the call at the backend, answers 504 deadline_exceeded with the id, audits and counts it', async () => {
    // JSON answers: the SDK server sends its head only with the result, after 40 × 150 ms.
    const server = await closing(startSdkServer({ responseMode: 'json' }))
    const gw = await startTestGateway(
      oneServer(server.url, { timeouts: { tools: { 'slow_*': DEADLINE_MS } } }),
    )
    const t0 = performance.now()
    const res = await slowCall(gw.mcpUrl('app'), 'call-7', 40, false)
    const answered = performance.now() - t0
    expect(res.statusCode).toBe(504)
    const body = (await res.body.json()) as Record<string, unknown>
    expect(body).toMatchObject({
      jsonrpc: '2.0',
      id: 'call-7',
      error: { code: -31504, data: { source: 'gateway', reason: 'deadline_exceeded' } },
    })
    expect(answered).toBeGreaterThanOrEqual(DEADLINE_MS - 500)
    // The backend saw its request cancelled, well before the 6 s its steps would take.
    await server.waitForAborts(1, CANCEL_MARGIN_MS)
    expect(performance.now() - t0).toBeLessThan(DEADLINE_MS + CANCEL_MARGIN_MS)
    expect(server.calls('tools/call')).toHaveLength(1)
    // The backend's late answer reaches nobody: the next request gets its own answer.
    const next = await mcpPost(
      gw.mcpUrl('app'),
      'tools/call',
      { name: 'get_forecast', arguments: { city: 'Oslo' } },
      { id: 'call-8' },
    )
    expect(next.status).toBe(200)
    expect(next.json()).toMatchObject({ id: 'call-8', result: { content: [{ type: 'text' }] } })
    expect(JSON.stringify(next.json())).not.toContain('aborted')
    await expect
      .poll(() => gw.logs.find((l) => l.audit === true && l.decision === 'deadline_exceeded'))
      .toMatchObject({
        server: 'app',
        method: 'tools/call',
        target: 'slow_forecast',
        deadlineMs: DEADLINE_MS,
        rule: 'timeouts.tools["slow_*"]',
        phase: 'head',
      })
    expect(
      gw.logs.filter((l) => l.msg === 'request' && l.outcome === 'deadline_exceeded'),
    ).toHaveLength(1)
    expect(await metricsText(gw)).toMatch(
      /mcp_edge_deadline_exceeded_total\{server="app",method="tools\/call",tool="other",phase="head"\} 1/,
    )
  })

  it('lets a slow tool with a longer deadline finish where the method deadline would cut it', async () => {
    const server = await closing(startSdkServer({ responseMode: 'json' }))
    const gw = await startTestGateway(
      oneServer(server.url, {
        timeouts: {
          // Without the tool's own deadline, 300 ms would cut this 1.2 s call.
          responseHeadersMs: 300,
          methods: { 'tools/call': 300 },
          tools: { 'slow_*': 10_000 },
        },
      }),
    )
    const res = await slowCall(gw.mcpUrl('app'), 'long-1', 8, false)
    expect(res.statusCode).toBe(200)
    const body = (await res.body.json()) as { id: string; result: object }
    expect(body.id).toBe('long-1')
    expect(textOf(body.result)).toContain('Forecast for Oslo')
    expect(server.abortedCalls).toBe(0)
    // Another tool keeps the method's deadline.
    const client = await closing(connectClient(gw.mcpUrl('app')))
    const fast = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(fast)).toContain('Forecast for Oslo')
    expect(gw.logs.some((l) => l.decision === 'deadline_exceeded')).toBe(false)
  })
})

describe('what a deadline keys on', () => {
  it('the Mcp-Name header where the body is forwarded unread (a server that checks headers itself)', async () => {
    const server = await closing(startSdkServer({ responseMode: 'json' }))
    // trustHeaders: classification takes Mcp-Method and Mcp-Name and forwards the body unread.
    const gw = await startTestGateway(
      oneServer(server.url, {
        trustHeaders: true,
        timeouts: { tools: { 'slow_*': DEADLINE_MS } },
      }),
    )
    const res = await slowCall(gw.mcpUrl('app'), 'trusted-1', 40, false)
    expect(res.statusCode).toBe(504)
    expect(await res.body.json()).toMatchObject({
      id: 'trusted-1',
      error: { code: -31504, data: { reason: 'deadline_exceeded' } },
    })
    await server.waitForAborts(1, CANCEL_MARGIN_MS)
  })
})

describe('a per-tool deadline over a streamed answer', () => {
  it('ends the SSE answer at the deadline with a final error event for the request, after its progress', async () => {
    const server = await closing(startSdkServer({ responseMode: 'sse' }))
    const gw = await startTestGateway(
      oneServer(server.url, { timeouts: { tools: { slow_forecast: DEADLINE_MS } } }),
    )
    const t0 = performance.now()
    // 100 steps: 15 s of progress, far past the deadline.
    const res = await slowCall(gw.mcpUrl('app'), 'stream-1', 100, true)
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('text/event-stream')
    const text = await res.body.text()
    const ended = performance.now() - t0
    expect(ended).toBeGreaterThanOrEqual(DEADLINE_MS - 50)
    expect(ended).toBeLessThan(DEADLINE_MS + 1000)
    const messages = sseMessages(text)
    const progress = messages.filter((m) => m.method === 'notifications/progress')
    expect(progress.length).toBeGreaterThan(0)
    // Whole events only, and the last is the gateway's error for this request.
    expect(text.endsWith('\n\n')).toBe(true)
    expect(messages.at(-1)).toMatchObject({
      id: 'stream-1',
      error: { code: -31504, data: { source: 'gateway', reason: 'deadline_exceeded' } },
    })
    expect(messages.filter((m) => 'result' in m || 'error' in m)).toHaveLength(1)
    await server.waitForAborts(1, CANCEL_MARGIN_MS)
    expect(performance.now() - t0).toBeLessThan(DEADLINE_MS + CANCEL_MARGIN_MS)
    await expect
      .poll(() => gw.logs.find((l) => l.msg === 'request' && l.method === 'tools/call'))
      .toMatchObject({ outcome: 'deadline_exceeded', status: 200 })
    expect(gw.logs.find((l) => l.decision === 'deadline_exceeded')).toMatchObject({
      phase: 'stream',
      target: 'slow_forecast',
    })
    expect(await metricsText(gw)).toMatch(
      /mcp_edge_deadline_exceeded_total\{server="app",method="tools\/call",tool="other",phase="stream"\} 1/,
    )
  })

  it('gives the v2 client the error for its call, with its progress before it', async () => {
    const server = await closing(startSdkServer())
    const gw = await startTestGateway(
      oneServer(server.url, { timeouts: { methods: { 'tools/call': DEADLINE_MS } } }),
    )
    const client = await closing(connectClient(gw.mcpUrl('app')))
    const steps: number[] = []
    const call = client.callTool(
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 100 } },
      { onprogress: (p) => void steps.push(p.progress), timeout: 20_000 },
    )
    await expect(call).rejects.toMatchObject({ code: -31504 })
    expect(steps.length).toBeGreaterThan(0)
    await server.waitForAborts(1, CANCEL_MARGIN_MS)
  })
})

describe('deadlines on a virtual server and for 2025-era clients', () => {
  it("cuts a member's call at the member's own deadline through the virtual endpoint", async () => {
    const weather = await closing(startSdkServer({ name: 'weather', responseMode: 'sse' }))
    const docs = await closing(startSdkServer({ name: 'docs' }))
    const gw = await startTestGateway({
      servers: {
        weather: {
          upstreams: [{ url: weather.url }],
          timeouts: { tools: { 'slow_*': DEADLINE_MS } },
        },
        docs: { upstreams: [{ url: docs.url }] },
      },
      virtualServers: { workspace: { members: ['weather', 'docs'], prefix: 'always' } },
    })
    const t0 = performance.now()
    const res = await request(gw.mcpUrl('workspace'), {
      method: 'POST',
      headers: mcpHeaders('tools/call', 'weather_slow_forecast'),
      body: JSON.stringify(
        mcpBody(
          'tools/call',
          {
            name: 'weather_slow_forecast',
            arguments: { city: 'Oslo', steps: 100 },
            _meta: { progressToken: 'v-1' },
          },
          'v-1',
        ),
      ),
    })
    expect(res.statusCode).toBe(200)
    const messages = sseMessages(await res.body.text())
    expect(messages.at(-1)).toMatchObject({
      id: 'v-1',
      error: { code: -31504, data: { reason: 'deadline_exceeded' } },
    })
    await weather.waitForAborts(1, CANCEL_MARGIN_MS)
    expect(performance.now() - t0).toBeLessThan(DEADLINE_MS + CANCEL_MARGIN_MS)
    expect(docs.calls('tools/call')).toHaveLength(0)
    // The audit line names the member, whose deadline it is.
    await expect
      .poll(() => gw.logs.find((l) => l.decision === 'deadline_exceeded'))
      .toMatchObject({ server: 'weather', target: 'slow_forecast', phase: 'stream' })
    // The docs member has no deadline: its own slow tool runs to its end.
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const done = await client.callTool({
      name: 'docs_slow_forecast',
      arguments: { city: 'Oslo', steps: 10 },
    })
    expect(textOf(done)).toContain('Forecast for Oslo')
  })

  it("cuts a 2025-only member's call (the gateway's own session toward it) at the member's deadline", async () => {
    // A 2025-era member (SDK v1, sessions): `progress` sends one progress event, then waits 5 s.
    const old = await closing(startLegacyV1Server({ progress: true }))
    const docs = await closing(startSdkServer({ name: 'docs' }))
    const gw = await startTestGateway({
      servers: {
        old: { upstreams: [{ url: old.url }], timeouts: { tools: { progress: DEADLINE_MS } } },
        docs: { upstreams: [{ url: docs.url }] },
      },
      virtualServers: { workspace: { members: ['old', 'docs'] } },
    })
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const t0 = performance.now()
    const steps: number[] = []
    await expect(
      client.callTool(
        { name: 'progress', arguments: {} },
        { onprogress: (p) => void steps.push(p.progress), timeout: 20_000 },
      ),
    ).rejects.toMatchObject({ code: -31504 })
    expect(performance.now() - t0).toBeLessThan(DEADLINE_MS + 1000)
    expect(steps).toEqual([1])
    await expect
      .poll(() => gw.logs.find((l) => l.decision === 'deadline_exceeded'))
      .toMatchObject({ server: 'old', method: 'tools/call', target: 'progress', phase: 'stream' })
    // The member's session is still good for the next call.
    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
    expect(textOf(echoed)).toBe('echo: hi')
  })

  it('gives a 2025-11-25 client (SDK v1) the error for its call and cancels it at the backend', async () => {
    const server = await closing(startSdkServer({ responseMode: 'json' }))
    const gw = await startTestGateway(
      oneServer(server.url, { timeouts: { tools: { slow_forecast: DEADLINE_MS } } }),
    )
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    const t0 = performance.now()
    // Before the head: the 504 itself, which the v1 transport reports with its body.
    await expect(
      client.callTool(
        { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 40 } },
        undefined,
        { timeout: 20_000 },
      ),
    ).rejects.toMatchObject({
      code: 504,
      message: expect.stringContaining('"reason":"deadline_exceeded"'),
    })
    await server.waitForAborts(1, CANCEL_MARGIN_MS)
    expect(performance.now() - t0).toBeLessThan(DEADLINE_MS + CANCEL_MARGIN_MS)
    const fast = await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })
    expect(textOf(fast)).toContain('Forecast for Oslo')
  })

  it('ends a 2025-era streamed answer at the deadline with the in-band error the v1 client reads', async () => {
    const server = await closing(startSdkServer())
    const gw = await startTestGateway(
      oneServer(server.url, { timeouts: { methods: { 'tools/*': DEADLINE_MS } } }),
    )
    const client = await closing(connectLegacyClient(gw.mcpUrl('app')))
    const steps: number[] = []
    await expect(
      client.callTool(
        { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 100 } },
        undefined,
        { onprogress: (p) => void steps.push(p.progress), timeout: 20_000 },
      ),
    ).rejects.toMatchObject({ code: -31504 })
    expect(steps.length).toBeGreaterThan(0)
    await server.waitForAborts(1, CANCEL_MARGIN_MS)
    // tools/list is under `tools/*` too, and answers well within it.
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
  })
})
