import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { request } from 'undici'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import {
  connectClient,
  connectLegacyClient,
  LEGACY_INITIALIZE,
  mcpBody,
  mcpHeaders,
  mcpPost,
  rawPost,
  rawRequest,
} from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import {
  sseEvent,
  startLegacyV1Server,
  startNonValidatingBackend,
  startSdkServer,
  type BehaviourHook,
  type TestServer,
} from '../helpers/sdk-servers.js'
import { streamOf } from '../helpers/streams.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

// 2025-era clients listening on a virtual server, 2025-only members listened to, and calls to a
// 2025-only member streamed (docs/virtual-servers.md "2025-era clients", "2025-only members").

const KEY = 'a-test-key-of-at-least-16-chars'
const LEGACY = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
}
const GET = { accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25' }

function upstreams(members: Record<string, { readonly url: string }>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(members).map(([name, s]) => [name, { upstreams: [{ url: s.url }] }]),
  )
}

/** The listen streams the virtual server opened on a 2026-07-28 member. */
function memberListens(server: TestServer) {
  return server
    .calls('subscriptions/listen')
    .filter((r) => String((r.json() as { id: unknown }).id).startsWith('mcp-edge-virtual'))
}

const gets = (server: TestServer) => server.requests.filter((r) => r.method === 'GET')

/** The JSON-RPC messages of an SSE body. */
function sseMessages(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .map((event) =>
      event
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n'),
    )
    .filter((data) => data !== '')
    .map((data) => JSON.parse(data) as Record<string, unknown>)
}

/** Refuses 2026-07-28 requests as a 2025-era server does (then: hook). */
function legacyOnly(hook: BehaviourHook): BehaviourHook {
  return (req, body) => {
    if (req.header('mcp-protocol-version') === '2026-07-28')
      return {
        status: 400,
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Unsupported protocol version"}}',
      }
    return hook(req, body)
  }
}

/** A raw 2025-era session on `url`: its id. */
async function legacySession(url: string, auth?: string): Promise<string> {
  const headers = auth === undefined ? LEGACY : { ...LEGACY, authorization: `Bearer ${auth}` }
  const init = await rawPost(url, LEGACY_INITIALIZE, headers)
  expect(init.status).toBe(200)
  return String(init.headers['mcp-session-id'])
}

describe('the GET stream of a 2025-era client on a virtual server (v1 SDK client)', () => {
  it('delivers tools/list_changed from a 2026 member and a 2025-only member; lists see the new tools', async () => {
    const extra: string[] = []
    const tickets = await closing(startSdkServer({ name: 'tickets', extraTools: extra }))
    const old = await closing(startLegacyV1Server())
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ tickets, old }),
      virtualServers: { workspace: { members: ['tickets', 'old'] } },
    })
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    const caps = client.getServerCapabilities()
    // the kinds the members notify about are promised; resources/subscribe is not offered
    expect(caps?.tools?.listChanged).toBe(true)
    expect(caps?.resources?.subscribe).toBeUndefined()
    const changes: unknown[] = []
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void changes.push(n))
    // the client's GET stream: one listen on the 2026 member, one GET on the 2025-only member,
    // in the member session the gateway holds for this client session
    await expect.poll(() => memberListens(tickets).length).toBe(1)
    await expect.poll(() => gets(old).length).toBe(1)
    const memberGet = gets(old)[0]
    const session = old.calls('notifications/initialized')[0]?.header('mcp-session-id')
    expect(session).toBeDefined()
    expect(memberGet?.header('mcp-session-id')).toBe(session)
    expect(memberGet?.header('accept')).toBe('text/event-stream')
    expect(memberGet?.header('mcp-protocol-version')).toMatch(/^2025-/)

    extra.push('added_modern')
    tickets.notify.toolsChanged()
    await expect.poll(() => changes.length).toBe(1)
    expect((changes[0] as { method: string }).method).toBe('notifications/tools/list_changed')
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('added_modern')

    old.addTool('added_legacy')
    await expect.poll(() => changes.length).toBe(2)
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('added_legacy')
    expect(textOf(await client.callTool({ name: 'added_legacy', arguments: {} }))).toBe(
      'added_legacy',
    )
    // one stream per member the whole time: the client's stream never ended
    expect(memberListens(tickets)).toHaveLength(1)
    expect(gets(old)).toHaveLength(1)
  })

  it('re-opens a 2025-only member’s stream that ends, without ending the client’s', async () => {
    let memberGets = 0
    const flaky = await closing(
      startNonValidatingBackend({
        behaviour: legacyOnly((req) => {
          if (req.method !== 'GET') return 'normal'
          memberGets++
          // the first GET stream ends at once; the next one stays open
          return memberGets === 1 ? { sse: [': bye\n\n'], end: true } : 'normal'
        }),
      }),
    )
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ flaky, tickets }),
      virtualServers: { workspace: { members: ['flaky', 'tickets'] } },
    })
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    const changes: unknown[] = []
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void changes.push(n))
    await expect.poll(() => memberGets, { timeout: 5000 }).toBe(2)
    // once back, the member's kinds are announced: a change in the gap is not lost
    await expect.poll(() => changes.length).toBe(1)
    flaky.notify.toolsChanged()
    await expect.poll(() => changes.length).toBe(2)
    await expect.poll(() => memberListens(tickets).length).toBe(1)
    tickets.notify.toolsChanged()
    await expect.poll(() => changes.length).toBe(3)
    // the client's stream stayed open: the 2026 member was listened to once only
    expect(memberListens(tickets)).toHaveLength(1)
  })

  it('answers 405 when no member offers change notifications, and promises none', async () => {
    const quiet = await closing(
      startNonValidatingBackend({
        behaviour: (_req, body) => {
          const m = body as { id?: unknown; method?: string } | undefined
          if (m?.method !== 'server/discover') return 'normal'
          const result = {
            supportedVersions: ['2026-07-28'],
            capabilities: { tools: {} },
            resultType: 'complete',
          }
          return {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ jsonrpc: '2.0', id: m.id, result }),
          }
        },
      }),
    )
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ quiet }),
      virtualServers: { workspace: { members: ['quiet'] } },
    })
    const init = await rawPost(gw.mcpUrl('workspace'), LEGACY_INITIALIZE, LEGACY)
    const caps = (init.json() as { result: { capabilities: { tools: object } } }).result
      .capabilities
    expect(caps.tools).toEqual({})
    const sid = String(init.headers['mcp-session-id'])
    const get = await rawRequest('GET', gw.mcpUrl('workspace'), {
      headers: { ...GET, 'mcp-session-id': sid },
    })
    expect(get.status).toBe(405)
    expect(get.headers.allow).toBe('POST')
    expect(gets(quiet)).toHaveLength(0)
    expect(quiet.calls('subscriptions/listen')).toHaveLength(0)
  })

  it('counts the stream against the caller’s stream budget', async () => {
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      limits: { maxStreamsPerPrincipal: 1 },
      servers: upstreams({ tickets }),
      virtualServers: { workspace: { members: ['tickets'] } },
    })
    const sid = await legacySession(gw.mcpUrl('workspace'))
    const headers = { ...GET, 'mcp-session-id': sid }
    const abort = new AbortController()
    onTestFinished(() => abort.abort())
    const first = await request(gw.mcpUrl('workspace'), {
      method: 'GET',
      headers,
      signal: abort.signal,
    })
    expect(first.statusCode).toBe(200)
    expect(first.headers['content-type']).toBe('text/event-stream')
    first.body.on('error', () => undefined)
    await expect.poll(() => memberListens(tickets).length).toBe(1)
    const second = await rawRequest('GET', gw.mcpUrl('workspace'), { headers })
    expect(second.status).toBe(429)
    const refused = second.json() as { id: unknown; error: unknown }
    expect(refused.error).toMatchObject({
      code: -31029,
      data: { source: 'gateway', reason: 'too_many_streams' },
    })
    expect(refused.id).toBeNull()
    expect(memberListens(tickets)).toHaveLength(1)
  })

  it('ends the stream when the gateway drains', async () => {
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const gw = await startTestGateway(
      {
        legacySessions: { key: KEY },
        servers: upstreams({ tickets }),
        virtualServers: { workspace: { members: ['tickets'] } },
      },
      { autoClose: false },
    )
    const sid = await legacySession(gw.mcpUrl('workspace'))
    const res = await request(gw.mcpUrl('workspace'), {
      method: 'GET',
      headers: { ...GET, 'mcp-session-id': sid },
    })
    expect(res.statusCode).toBe(200)
    await expect.poll(() => memberListens(tickets).length).toBe(1)
    const closed = gw.close(20_000)
    // the stream ends at once (a drain does not wait for it), as a 2025-era stream ends: no result
    const text = await res.body.text()
    expect(text).not.toContain('"result"')
    await closed
  })

  it('refuses a GET with a tampered, unknown or another caller’s session id; nothing is opened', async () => {
    const ISS = 'https://issuer.test'
    const PUBLIC = 'https://gw.test'
    const key = await generateTestKey('ES256')
    const jwks = await closing(startJwks([key]))
    const mint = (sub: string): Promise<string> =>
      mintToken(claimsFor(ISS, `${PUBLIC}/mcp/workspace`, { sub }), { key })
    const tickets = await closing(startSdkServer({ name: 'tickets' }))
    const old = await closing(startLegacyV1Server())
    const gw = await startTestGateway({
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      legacySessions: { key: KEY },
      servers: upstreams({ tickets, old }),
      virtualServers: { workspace: { members: ['tickets', 'old'] } },
    })
    const alice = await mint('alice')
    const bob = await mint('bob')
    const sid = await legacySession(gw.mcpUrl('workspace'), alice)
    const before = old.requests.length
    for (const [who, bad] of [
      [bob, sid], // alice's session, presented by bob
      [alice, `${sid.slice(0, -2)}AA`],
      [alice, 'nope'],
    ] as const) {
      const res = await rawRequest('GET', gw.mcpUrl('workspace'), {
        headers: { ...GET, 'mcp-session-id': bad, authorization: `Bearer ${who}` },
      })
      expect(res.status).toBe(404)
      const body = res.json() as { id: unknown; error: { code: number; data: { reason: string } } }
      expect(body.error.code).toBe(-32001)
      expect(body.error.data.reason).toBe('session_not_found')
      expect(body.id).toBeNull()
    }
    // and without a session id, GET is not an MCP request at all
    const none = await rawRequest('GET', gw.mcpUrl('workspace'), {
      headers: { ...GET, authorization: `Bearer ${alice}` },
    })
    expect(none.status).toBe(405)
    expect(old.requests.length).toBe(before)
    expect(gets(old)).toHaveLength(0)
    expect(memberListens(tickets)).toHaveLength(0)
    // the owner's own GET opens the stream
    const own = await rawRequest('GET', gw.mcpUrl('workspace'), {
      headers: { ...GET, 'mcp-session-id': sid, authorization: `Bearer ${alice}` },
      timeoutMs: 500,
    })
    expect(own.status).toBe(200)
    expect(own.truncated).toBe(true)
    expect(gets(old)).toHaveLength(1)
  })
})

describe('subscriptions/listen of a 2026-07-28 client reaches a 2025-only member', () => {
  it('opens the member’s GET stream in the caller’s member session and forwards its changes', async () => {
    const old = await closing(startLegacyV1Server())
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ old }),
      virtualServers: { workspace: { members: ['old'] } },
    })
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const changes: unknown[] = []
    client.setNotificationHandler('notifications/tools/list_changed', (n) => void changes.push(n))
    const subscription = await client.listen({ toolsListChanged: true })
    onTestFinished(() => subscription.close())
    expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true })
    await expect.poll(() => gets(old).length).toBe(1)
    expect(gets(old)[0]?.header('mcp-session-id')).toBeDefined()
    old.addTool('added_legacy')
    await expect.poll(() => changes.length).toBe(1)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('added_legacy')
  })
})

describe('calls routed to a 2025-only member are streamed', () => {
  async function setup(progress: true | 'session' = true, foreignProgress?: string) {
    const old = await closing(
      startLegacyV1Server({
        progress,
        ...(foreignProgress !== undefined && { foreignProgress }),
      }),
    )
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ old }),
      virtualServers: { workspace: { members: ['old'] } },
    })
    return { old, gw }
  }

  it('relays progress to the v2 client before the result', async () => {
    const { old, gw } = await setup()
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const progress: unknown[] = []
    const call = client.callTool(
      { name: 'progress', arguments: {} },
      { onprogress: (p) => void progress.push(p) },
    )
    // the member holds its result until the client has seen the progress: streamed, not collected
    await vi.waitFor(() => expect(progress).toHaveLength(1), { timeout: 3000 })
    old.finishProgress()
    const result = await call
    expect(textOf(result)).toMatch(/^\d+$/)
    expect(progress[0]).toMatchObject({ progress: 1, total: 2 })
    // streamed answers carry resultType for a 2026-07-28 client, and never the member's session id
    const raw = await mcpPost(gw.mcpUrl('workspace'), 'tools/call', {
      name: 'echo',
      arguments: { text: 'x' },
    })
    expect(raw.status).toBe(200)
    expect(raw.response().result).toMatchObject({ resultType: 'complete' })
    expect(raw.headers['mcp-session-id']).toBeUndefined()
    expect(old.calls('tools/call').at(-1)?.header('mcp-session-id')).toBeDefined()
  })

  it('relays progress to the v1 client before the result', async () => {
    const { old, gw } = await setup()
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    const progress: unknown[] = []
    const call = client.callTool({ name: 'progress', arguments: {} }, undefined, {
      onprogress: (p) => void progress.push(p),
    })
    await vi.waitFor(() => expect(progress).toHaveLength(1), { timeout: 3000 })
    old.finishProgress()
    const result = await call
    expect(textOf(result)).toMatch(/^\d+$/)
    // a 2025-era client gets the member's result as is
    expect(result).not.toHaveProperty('resultType')
  })

  it('relays progress the member sends on its session stream, to the v2 client', async () => {
    const { old, gw } = await setup('session')
    const client = await closing(connectClient(gw.mcpUrl('workspace')))
    const progress: unknown[] = []
    const call = client.callTool(
      { name: 'progress', arguments: {} },
      { onprogress: (p) => void progress.push(p) },
    )
    // nobody else reads the session the gateway holds: the call read its GET stream while it ran
    await vi.waitFor(() => expect(progress).toHaveLength(1), { timeout: 3000 })
    old.finishProgress()
    expect(textOf(await call)).toMatch(/^\d+$/)
    expect(progress[0]).toMatchObject({ progress: 1, total: 2 })
    const get = gets(old)[0]
    expect(get?.header('mcp-session-id')).toBe(old.calls('tools/call')[0]?.header('mcp-session-id'))
  })

  it('relays session-stream progress to the v1 client on the stream its listen shares', async () => {
    const { old, gw } = await setup('session')
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    const changes: unknown[] = []
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void changes.push(n))
    // the client's GET stream has the gateway listen on the member session's own
    await expect.poll(() => gets(old).length).toBe(1)
    const progress: unknown[] = []
    const call = client.callTool({ name: 'progress', arguments: {} }, undefined, {
      onprogress: (p) => void progress.push(p),
    })
    await vi.waitFor(() => expect(progress).toHaveLength(1), { timeout: 3000 })
    old.finishProgress()
    expect(textOf(await call)).toMatch(/^\d+$/)
    // one stream per session (the v1 SDK refuses a second one with 409), read by both
    expect(gets(old)).toHaveLength(1)
    old.addTool('added_legacy')
    await expect.poll(() => changes.length).toBe(1)
  })

  it('relays only the call’s own progress, under the client’s token', async () => {
    // the member first sends progress for the client's token value, as for another session's call
    const { old, gw } = await setup('session', 'mine')
    const params = { name: 'progress', arguments: {}, _meta: { progressToken: 'mine' } }
    const res = await request(gw.mcpUrl('workspace'), {
      method: 'POST',
      headers: mcpHeaders('tools/call', 'progress'),
      body: JSON.stringify(mcpBody('tools/call', params, 'call-1')),
    })
    const stream = streamOf(res)
    await expect.poll(() => stream.text()).toContain('"progress":1')
    old.finishProgress()
    await stream.ended
    const messages = sseMessages(stream.text())
    expect(messages.filter((m) => m.method === 'notifications/progress')).toEqual([
      {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: 'mine', progress: 1, total: 2 },
      },
    ])
    expect(messages.at(-1)).toMatchObject({ id: 'call-1', result: { resultType: 'complete' } })
    // the member was given a token of the gateway's own for the call, never the client's
    const sent = old.calls('tools/call')[0]?.json() as {
      params: { _meta: Record<string, unknown> }
    }
    expect(sent.params._meta.progressToken).toMatch(/^mcp-edge-progress-[0-9a-f]{32}$/)
    // what the member echoed of its token reaches the client as the client's token, as text
    expect(textOf(messages.at(-1)?.result as never)).toBe('mine')
  })

  it('gives an integer token back as a number where it is the token, as text where echoed', async () => {
    // the official clients use the request's id, an integer, as the token (conformance suite)
    const { old, gw } = await setup()
    const params = { name: 'progress', arguments: {}, _meta: { progressToken: 7 } }
    const res = await request(gw.mcpUrl('workspace'), {
      method: 'POST',
      headers: mcpHeaders('tools/call', 'progress'),
      body: JSON.stringify(mcpBody('tools/call', params, 7)),
    })
    const stream = streamOf(res)
    await expect.poll(() => stream.text()).toContain('"progress":1')
    old.finishProgress()
    await stream.ended
    const messages = sseMessages(stream.text())
    expect(messages.filter((m) => m.method === 'notifications/progress')).toEqual([
      {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: 7, progress: 1, total: 2 },
      },
    ])
    // the member's String(token) of the gateway's token is the string "7", never the number 7
    expect(messages.at(-1)).toMatchObject({
      id: 7,
      result: { content: [{ type: 'text', text: '7' }] },
    })
  })

  it('initialises the member again when it no longer knows its session, once', async () => {
    let calls = 0
    const member = await closing(
      startNonValidatingBackend({
        behaviour: legacyOnly((_req, body) => {
          const m = body as { id?: unknown; method?: string } | undefined
          if (m?.method !== 'tools/call') return 'normal'
          calls++
          // the first call finds its session gone (the member restarted), the second is answered
          if (calls === 1)
            return {
              status: 404,
              headers: { 'content-type': 'application/json' },
              body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}',
            }
          const result = { content: [{ type: 'text', text: 'again' }] }
          return { sse: [sseEvent({ jsonrpc: '2.0', id: m.id, result })] }
        }),
      }),
    )
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ member }),
      virtualServers: { workspace: { members: ['member'] } },
    })
    const res = await mcpPost(gw.mcpUrl('workspace'), 'tools/call', { name: 'echo' }, { id: 8 })
    expect(res.status).toBe(200)
    expect(res.headers['content-type']).toBe('text/event-stream')
    expect(res.response()).toMatchObject({ id: 8, result: { resultType: 'complete' } })
    expect(member.calls('tools/call')).toHaveLength(2)
    expect(member.calls('initialize')).toHaveLength(2)
    expect(res.text).not.toContain('Session not found')
  })

  it('refuses an answer with another request’s id (upstream_id_mismatch)', async () => {
    const member = await closing(
      startNonValidatingBackend({
        behaviour: legacyOnly((_req, body) =>
          (body as { method?: string } | undefined)?.method === 'tools/call'
            ? {
                sse: [
                  sseEvent({ jsonrpc: '2.0', method: 'notifications/progress', params: {} }),
                  sseEvent({ jsonrpc: '2.0', id: 'not-yours', result: { content: [] } }),
                ],
              }
            : 'normal',
        ),
      }),
    )
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: upstreams({ member }),
      virtualServers: { workspace: { members: ['member'] } },
    })
    const res = await mcpPost(
      gw.mcpUrl('workspace'),
      'tools/call',
      { name: 'echo', arguments: {} },
      { id: 'call-7' },
    )
    expect(res.status).toBe(200)
    const answer = res.response()
    expect(answer.id).toBe('call-7')
    expect(answer.error).toMatchObject({ data: { reason: 'upstream_id_mismatch' } })
    expect(res.text).not.toContain('not-yours')
    expect(member.calls('tools/call')).toHaveLength(1)
  })
})
