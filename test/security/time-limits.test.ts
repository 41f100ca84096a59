import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { mcpPost, rawRequest, type RawResponse } from '../helpers/clients.js'
import { adminUrl, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { poolConfig, startReplicas, type MockReplica } from '../helpers/replicas.js'

/**
 * Time limits hold: a slow header block is cut off close to limits.headersTimeoutMs (Node checks
 * it only every connectionsCheckingInterval), and a request no replica can take is answered 503
 * with Retry-After at once instead of a 502 (docs/balancing.md "Limits and failing fast").
 */

/** Writes a request head that never ends, one header line every `everyMs`; resolves on close. */
function trickleHeaders(
  port: number,
  everyMs: number,
): Promise<{ elapsedMs: number; received: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    const t0 = performance.now()
    let received = ''
    let n = 0
    let timer: NodeJS.Timeout | undefined
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')))
    socket.on('error', () => undefined) // a reset is an acceptable way to be cut off
    socket.on('close', () => {
      clearInterval(timer)
      resolve({ elapsedMs: performance.now() - t0, received })
    })
    socket.on('connect', () => {
      socket.write(
        'POST /mcp/app HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n',
      )
      timer = setInterval(() => {
        if (!socket.destroyed) socket.write(`X-Slow-${n++}: still typing\r\n`)
      }, everyMs)
    })
  })
}

/**
 * Sends `n` requests one after another, checks each answer, and returns the median time the
 * gateway took to answer them, as its access log reports it (the client's own round trip adds
 * nothing the gateway controls, and much noise on a busy machine). One warm-up request first.
 */
async function medianMs(
  gw: TestGateway,
  n: number,
  send: (i: number) => Promise<RawResponse>,
  check: (res: RawResponse, i: number) => void,
): Promise<number> {
  check(await send(1000), 1000)
  const before = gw.logs.length
  for (let i = 0; i < n; i++) check(await send(i), i)
  await expect.poll(() => accessTimes(gw, before).length).toBe(n)
  const times = accessTimes(gw, before).sort((a, b) => a - b)
  return times[Math.floor(n / 2)] as number
}

function accessTimes(gw: TestGateway, from: number): number[] {
  return gw.logs
    .slice(from)
    .filter((l) => l['msg'] === 'request')
    .map((l) => Number(l['ms']))
}

function expectNoUpstream(res: RawResponse, id: number): void {
  expect(res.status).toBe(503)
  expect(res.headers['retry-after']).toBe('1')
  expect(res.headers['x-mcp-gateway-error']).toBe('no_upstream')
  expect(res.json()).toMatchObject({
    jsonrpc: '2.0',
    id,
    error: { code: -31503, data: { source: 'gateway', reason: 'no_upstream' } },
  })
}

const received = (rs: readonly MockReplica[], method?: string): number =>
  rs.reduce((n, r) => n + r.count(method), 0)

async function ejected(gw: TestGateway): Promise<string[]> {
  const res = await rawRequest('GET', `${adminUrl(gw)}/readyz`)
  const out = (res.json() as { upstreamsOut: { upstream: string; state: string }[] }).upstreamsOut
  return out.filter((o) => o.state === 'ejected').map((o) => o.upstream)
}

describe('limits.headersTimeoutMs holds to within a second', () => {
  it('a header block that trickles in is cut off (408 or close) within the limit + 1 s', async () => {
    const rs = await startReplicas(1)
    const gw = await startTestGateway({ limits: { headersTimeoutMs: 1000 }, ...poolConfig(rs) })
    const { elapsedMs, received: answer } = await trickleHeaders(gw.port, 100)
    expect(elapsedMs).toBeGreaterThanOrEqual(950) // the limit, not something earlier
    expect(elapsedMs).toBeLessThan(2000) // Node's default check (every 30 s) would miss this
    if (answer !== '') expect(answer).toMatch(/^HTTP\/1\.1 408 /)
    expect(rs[0]?.calls).toHaveLength(0)
    // The listener is fine afterwards.
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/list')).status).toBe(200)
  })
})

describe('no replica can take the request: 503 no_upstream with Retry-After, fast', () => {
  it('every replica refuses the connection (closed ports), even for tools/call', async () => {
    const rs = await startReplicas(3)
    // Ejection off the table: every try really goes to the closed ports.
    const outlier = { consecutiveFailures: 1000 }
    const gw = await startTestGateway(poolConfig(rs, { outlier }))
    await Promise.all(rs.map((r) => r.kill()))
    const url = gw.mcpUrl('app')
    const send = (i: number): Promise<RawResponse> =>
      mcpPost(url, i % 2 === 0 ? 'tools/call' : 'tools/list', { name: 'x' }, { id: i })
    expect(await medianMs(gw, 15, send, expectNoUpstream)).toBeLessThan(50)
    expect(received(rs)).toBe(0)
  })

  it('every replica ejected or refusing (panic mode tries the ejected ones)', async () => {
    const rs = await startReplicas(3)
    const outlier = { consecutiveFailures: 1, baseEjectionMs: 60_000 }
    const gw = await startTestGateway(poolConfig(rs, { outlier }))
    await Promise.all(rs.map((r) => r.kill()))
    const url = gw.mcpUrl('app')
    expectNoUpstream(await mcpPost(url, 'tools/call', { name: 'x' }, { id: 100 }), 100)
    // The last replica is never ejected, so two of three are out.
    expect(await ejected(gw)).toHaveLength(2)
    const send = (i: number): Promise<RawResponse> =>
      mcpPost(url, 'tools/call', { name: 'x' }, { id: i })
    expect(await medianMs(gw, 15, send, expectNoUpstream)).toBeLessThan(50)
    expect(received(rs)).toBe(0)
  })

  it('a replica that took the request and failed it stays a 502, even when the rest refuse', async () => {
    const rs = await startReplicas(2, (c) =>
      c.method === 'tools/list'
        ? { status: 503, body: '<html>maintenance</html>' }
        : c.method === 'tools/call'
          ? 'reset'
          : 'ok',
    )
    const outlier = { consecutiveFailures: 1000 }
    const gw = await startTestGateway(poolConfig(rs, { outlier }))
    await rs[1]?.kill()
    const url = gw.mcpUrl('app')
    for (let i = 0; i < 4; i++) {
      // Garbage from r0 (retried: a safe method), refused by r1: the garbage is the answer.
      const list = await mcpPost(url, 'tools/list', {}, { id: i })
      expect(list.status).toBe(502)
      expect(list.json()).toMatchObject({
        id: i,
        error: { data: { reason: 'upstream_bad_response' } },
      })
      // A reset after r0 read the call: never retried, a 502 whichever replica was tried first.
      const call = await mcpPost(url, 'tools/call', { name: 'x' }, { id: 10 + i })
      expect(call.status).toBe(502)
      expect(call.json()).toMatchObject({
        id: 10 + i,
        error: { data: { reason: 'upstream_unavailable' } },
      })
    }
    expect(rs[0]?.count('tools/call')).toBe(4) // each call reached a backend exactly once
  })
})
