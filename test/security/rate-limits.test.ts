import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders, mcpPost } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

const POLICY = `
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }
`

async function setup(limits: string, extra: Record<string, unknown> = {}) {
  const server = await closing(startSdkServer())
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-limits-sec-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY + limits)
  const gw = await startTestGateway({ ...oneServer(server.url), policies: '.', ...extra }, { dir })
  return { server, url: gw.mcpUrl('app') }
}

/** Opens a listen stream as `user`; `close()` drops the connection (the client goes away). */
async function listen(url: string, user: string, id: number) {
  const abort = new AbortController()
  const res = await request(url, {
    method: 'POST',
    headers: { ...mcpHeaders('subscriptions/listen'), 'x-user': user },
    body: JSON.stringify(
      mcpBody('subscriptions/listen', { notifications: { toolsListChanged: true } }, id),
    ),
    signal: abort.signal,
  })
  if (res.statusCode !== 200) {
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers, text, close: () => undefined }
  }
  res.body.on('error', () => undefined)
  res.body.resume()
  onTestFinished(() => abort.abort())
  return { status: 200, headers: res.headers, text: '', close: () => abort.abort() }
}

describe('rate limits cannot be dodged', () => {
  it('key: ip ignores X-Forwarded-For from a connection that is not a trusted proxy', async () => {
    const { server, url } = await setup(`
limits:
  - name: per-ip
    servers: [app]
    methods: ["*"]
    key: ip
    rate: 2/hour
`)
    const statuses = []
    for (let i = 0; i < 4; i++) {
      const res = await mcpPost(
        url,
        'tools/list',
        {},
        {
          id: i,
          headers: { 'x-forwarded-for': `203.0.113.${i}` },
        },
      )
      statuses.push(res.status)
      if (res.status === 429) expect(res.response().id).toBe(i)
    }
    expect(statuses).toEqual([200, 200, 429, 429])
    expect(server.calls('tools/list')).toHaveLength(2)
  })

  it('behind a trusted proxy each forwarded client has its own bucket', async () => {
    const { url } = await setup(
      `
limits:
  - name: per-ip
    servers: [app]
    methods: ["*"]
    key: ip
    rate: 1/hour
`,
      { trustedProxies: ['127.0.0.0/8', '::1'] },
    )
    const from = (ip: string, id: number) =>
      mcpPost(url, 'tools/list', {}, { id, headers: { 'x-forwarded-for': ip } })
    expect((await from('198.51.100.1', 1)).status).toBe(200)
    expect((await from('198.51.100.1', 2)).status).toBe(429)
    expect((await from('198.51.100.2', 3)).status).toBe(200)
    // The client's own left-hand entries are not believed: the proxy's hop decides.
    expect((await from('1.1.1.1, 198.51.100.2', 4)).status).toBe(429)
  })
})

describe('fair sharing: one caller cannot take what others need', () => {
  it("one caller's listen streams and slow calls stop at its limits; another caller is served", async () => {
    const { server, url } = await setup(`
limits:
  - name: streams-per-user
    servers: [app]
    methods: [subscriptions/listen]
    key: header:X-User
    concurrency: 2
  - name: slow-per-user
    servers: [app]
    tools: [slow_forecast]
    key: header:X-User
    concurrency: 1
`)
    const a1 = await listen(url, 'a', 1)
    const a2 = await listen(url, 'a', 2)
    expect([a1.status, a2.status]).toEqual([200, 200])
    const slowA = mcpPost(
      url,
      'tools/call',
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 4 } },
      { id: 3, headers: { 'x-user': 'a' } },
    )
    await expect.poll(() => server.calls('tools/call').length).toBe(1)
    const listensSeen = server.calls('subscriptions/listen').length
    // a is at both limits: refused with its id, nothing forwarded.
    const a3 = await listen(url, 'a', 4)
    expect(a3.status).toBe(429)
    expect(JSON.parse(a3.text)).toMatchObject({ id: 4, error: { code: -31029 } })
    const slowA2 = await mcpPost(
      url,
      'tools/call',
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 1 } },
      { id: 5, headers: { 'x-user': 'a' } },
    )
    expect(slowA2.status).toBe(429)
    expect(slowA2.response().id).toBe(5)
    expect(server.calls('subscriptions/listen')).toHaveLength(listensSeen)
    expect(server.calls('tools/call')).toHaveLength(1)
    // b gets its own streams and slow calls meanwhile.
    expect((await listen(url, 'b', 6)).status).toBe(200)
    const slowB = await mcpPost(
      url,
      'tools/call',
      { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 1 } },
      { id: 7, headers: { 'x-user': 'b' } },
    )
    expect(slowB.status).toBe(200)
    expect((await slowA).status).toBe(200)
    // A stream the client drops gives its slot back.
    a1.close()
    await expect.poll(async () => (await listen(url, 'a', 8)).status).toBe(200)
  })
})
