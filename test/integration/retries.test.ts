import { describe, expect, it } from 'vitest'
import { SessionCodec, sessionKey } from '../../src/upstream/sessions.js'
import { mcpPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import {
  poolConfig,
  startReplicas,
  type Fault,
  type MockReplica,
  type ReceivedCall,
} from '../helpers/replicas.js'

const QUIET = { log: { level: 'warn' } }
const SAFE = [
  'server/discover',
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/get',
  'completion/complete',
] as const
const UNSAFE = ['tools/call', 'subscriptions/listen', 'tasks/update', 'vendor/custom'] as const

function paramsFor(method: string): Record<string, unknown> {
  if (method === 'resources/read') return { uri: 'docs://a' }
  if (method === 'tools/call' || method === 'prompts/get') return { name: 'a' }
  // A task id the gateway issued (sealed with this process's key), so the request is forwarded.
  if (method === 'tasks/update') {
    const codec = new SessionCodec(sessionKey(undefined).key, 'app', [])
    return { taskId: codec.sealTask('task-1', undefined), inputResponses: {} }
  }
  return {}
}

/** The first request of `method` (anywhere) gets `fault`; everything else is answered. */
function firstOnly(method: string, fault: Fault): (c: ReceivedCall) => Fault {
  let done = false
  return (c) => {
    if (c.method !== method || done) return 'ok'
    done = true
    return fault
  }
}

function received(rs: readonly MockReplica[], method: string): number {
  return rs.reduce((n, r) => n + r.count(method), 0)
}

async function retryMetric(gw: TestGateway, result: string): Promise<number> {
  const m = await gw.metrics.retries.get()
  return m.values.find((v) => v.labels['result'] === result)?.value ?? 0
}

describe('retries follow the retry-safety matrix (reliability.md §4.1)', () => {
  it.each(SAFE)(
    '%s reset after it was received: retried once on another replica, the client sees success',
    async (method) => {
      const rs = await startReplicas(3, firstOnly(method, 'reset'))
      const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
      const res = await mcpPost(gw.mcpUrl('app'), method, paramsFor(method), { id: 7 })
      expect(res.status, res.text).toBe(200)
      expect(res.json()).toMatchObject({ id: 7, result: {} })
      expect(received(rs, method)).toBe(2)
      expect(new Set(rs.filter((r) => r.count(method) > 0).map((r) => r.name)).size).toBe(2)
      expect(await retryMetric(gw, 'retried')).toBe(1)
    },
  )

  it.each(UNSAFE)(
    '%s reset after it was received: a 502 for the client, never run twice',
    async (method) => {
      const rs = await startReplicas(3, (c) => (c.method === method ? 'reset' : 'ok'))
      const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
      const res = await mcpPost(gw.mcpUrl('app'), method, paramsFor(method), { id: 'x-1' })
      expect(res.status).toBe(502)
      expect(res.json()).toMatchObject({
        id: 'x-1',
        error: { code: -31502, data: { source: 'gateway' } },
      })
      expect(received(rs, method)).toBe(1) // exactly once across the three replicas
    },
  )

  it('a refused connection (NotSent) goes to another replica even for tools/call, which runs once', async () => {
    const rs = await startReplicas(3)
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs, { balance: 'round-robin' }) })
    await rs[0]?.kill()
    for (let i = 0; i < 6; i++) {
      const res = await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'a' }, { id: i })
      expect(res.status).toBe(200)
    }
    expect(received(rs, 'tools/call')).toBe(6)
    expect(await retryMetric(gw, 'not_sent')).toBeGreaterThanOrEqual(2)
  })

  it('502/503/504 without a JSON-RPC body: safe methods retried, tools/call answered 502 once', async () => {
    const html: Fault = { status: 503, body: '<html>maintenance</html>' }
    const rs = await startReplicas(3, firstOnly('tools/list', html))
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/list')).status).toBe(200)
    expect(received(rs, 'tools/list')).toBe(2)
    for (const r of rs) r.setFault((c) => (c.method === 'tools/call' ? html : 'ok'))
    const call = await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'a' }, { id: 3 })
    expect(call.status).toBe(502)
    expect(call.headers['x-mcp-gateway-error']).toBe('upstream_bad_response')
    expect(call.text).not.toContain('maintenance') // never the backend's page
    expect(received(rs, 'tools/call')).toBe(1)
  })

  it("relays a backend's own JSON-RPC error on a 5xx as is, without retrying it", async () => {
    const body = '{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"backend says no"}}'
    const rs = await startReplicas(3, () => ({
      status: 503,
      body,
      contentType: 'application/json',
    }))
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/list', {}, { id: 5 })
    expect(res.status).toBe(503)
    expect(res.text).toBe(body)
    expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
    expect(received(rs, 'tools/list')).toBe(1)
  })

  it('never retries once a response byte went to the client', async () => {
    const progress =
      'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'
    const rs = await startReplicas(3, (c) =>
      c.method === 'tools/list' ? { sse: [progress], reset: true } : 'ok',
    )
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs) })
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/list', {}, { id: 9 })
    expect(res.status).toBe(200)
    expect(res.text.startsWith(progress)).toBe(true)
    expect(res.response()).toMatchObject({
      id: 9,
      error: { data: { reason: 'upstream_stream_broken' } },
    })
    expect(received(rs, 'tools/list')).toBe(1)
  })

  it('a black-holed list is retried within the deadline when a per-try timeout is set', async () => {
    const rs = await startReplicas(3, firstOnly('tools/list', 'hang'))
    const timeouts = { responseHeadersMs: 2000 }
    const gw = await startTestGateway({
      ...QUIET,
      ...poolConfig(rs, { timeouts, retry: { perTryTimeoutMs: 200 } }),
    })
    const t0 = performance.now()
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/list')
    expect(res.status).toBe(200)
    expect(performance.now() - t0).toBeLessThan(1500)
    expect(received(rs, 'tools/list')).toBe(2)
  })

  it('the deadline covers every try: a black hole that used it all is a 504, not a retry', async () => {
    const rs = await startReplicas(3, firstOnly('tools/list', 'hang'))
    const gw = await startTestGateway({
      ...QUIET,
      ...poolConfig(rs, { timeouts: { responseHeadersMs: 300 } }),
    })
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/list')
    expect(res.status).toBe(504)
    expect(received(rs, 'tools/list')).toBe(1)
    expect(await retryMetric(gw, 'deadline')).toBe(1)
  })

  it('an exhausted retry budget answers the failure instead of retrying (reliability B-24)', async () => {
    const rs = await startReplicas(3, firstOnly('tools/list', 'reset'))
    const gw = await startTestGateway({
      ...QUIET,
      ...poolConfig(rs, { retry: { budgetPercent: 0, minConcurrent: 0 } }),
    })
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/list')
    expect(res.status).toBe(502)
    expect(received(rs, 'tools/list')).toBe(1)
    expect(await retryMetric(gw, 'budget_exhausted')).toBe(1)
  })

  it('retry.attempts: 0 turns retries of sent requests off', async () => {
    const rs = await startReplicas(3, firstOnly('tools/list', 'reset'))
    const gw = await startTestGateway({ ...QUIET, ...poolConfig(rs, { retry: { attempts: 0 } }) })
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/list')).status).toBe(502)
    expect(received(rs, 'tools/list')).toBe(1)
  })
})
