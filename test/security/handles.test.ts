import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  mcpPost,
  rawPost,
  rawRequest,
  type RawResponse,
  LEGACY_INITIALIZE,
} from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import {
  startLegacyV1Server,
  startNonValidatingBackend,
  sseEvent,
  type BehaviourHook,
  type TestServer,
} from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  startJwks,
  type TestKey,
} from '../helpers/tokens.js'

// A handle (2025-era session id, task id) the gateway issued to one principal is unknown to every
// other: 404 -32001 for sessions, the backend's own "task not found" for tasks, nothing forwarded.

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/app`
const KEY = 'a-test-key-of-at-least-16-chars'
const LEGACY = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
}

interface Principals {
  readonly alice: string
  readonly bob: string
  readonly key: TestKey
  readonly jwksUrl: string
}

async function principals(): Promise<Principals> {
  const key = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const mint = (sub: string): Promise<string> => mintToken(claimsFor(ISS, AUD, { sub }), { key })
  return { alice: await mint('alice'), bob: await mint('bob'), key, jwksUrl: jwks.url }
}

function gateway(
  p: Principals,
  upstreams: readonly TestServer[],
  server: Record<string, unknown> = {},
): Promise<TestGateway> {
  return startTestGateway({
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: p.jwksUrl } },
    legacySessions: { key: KEY },
    servers: { app: { upstreams: upstreams.map((u) => ({ url: u.url })), ...server } },
  })
}

/** A v1 (2025-11-25) SDK client through the gateway with a bearer token. */
async function v1Client(url: string, token: string): Promise<[V1Client, V1Transport]> {
  const transport = new V1Transport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  })
  const client = new V1Client({ name: 'handles-test', version: '1.0.0' })
  await client.connect(transport)
  onTestFinished(() => client.close())
  return [client, transport]
}

function expectSessionNotFound(res: RawResponse, id: unknown): void {
  expect(res.status).toBe(404)
  expect(res.json()).toMatchObject({
    jsonrpc: '2.0',
    id,
    error: { code: -32001, data: { reason: 'session_not_found' } },
  })
}

describe('2025-era session ids are bound to the principal that opened them', () => {
  it('another principal gets 404 on POST, GET and DELETE and the backend sees nothing', async () => {
    const p = await principals()
    const backend = await closing(startLegacyV1Server())
    const gw = await gateway(p, [backend])
    const [client, transport] = await v1Client(gw.mcpUrl('app'), p.alice)
    expect((await client.callTool({ name: 'echo', arguments: { text: 'a' } })).content).toEqual([
      { type: 'text', text: 'echo: a' },
    ])
    const stolen = transport.sessionId as string
    const before = backend.requests.length
    const asBob = { ...LEGACY, authorization: `Bearer ${p.bob}`, 'mcp-session-id': stolen }
    const call = {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'b' } },
    }
    expectSessionNotFound(await rawPost(gw.mcpUrl('app'), call, asBob), 7)
    const get = await rawRequest('GET', gw.mcpUrl('app'), {
      headers: {
        accept: 'text/event-stream',
        authorization: `Bearer ${p.bob}`,
        'mcp-session-id': stolen,
      },
    })
    expectSessionNotFound(get, null)
    const del = await rawRequest('DELETE', gw.mcpUrl('app'), {
      headers: { authorization: `Bearer ${p.bob}`, 'mcp-session-id': stolen },
    })
    expectSessionNotFound(del, null)
    expect(backend.requests.length).toBe(before) // nothing of Bob's reached the backend
    // Alice's session is untouched and still hers.
    expect((await client.callTool({ name: 'echo', arguments: { text: 'c' } })).content).toEqual([
      { type: 'text', text: 'echo: c' },
    ])
    // The backend's own id is not readable from the id Alice holds.
    const upstreamId = backend.requests.at(-1)?.header('mcp-session-id') as string
    expect(upstreamId).toMatch(/^[0-9a-f-]{36}$/)
    expect(stolen.includes(upstreamId)).toBe(false)
    expect(
      Buffer.from(stolen.split('.')[1] as string, 'base64url').includes(Buffer.from(upstreamId)),
    ).toBe(false)
    await transport.terminateSession()
    expect(backend.requests.filter((r) => r.method === 'DELETE')).toHaveLength(1)
  })

  it('tampered ids are 404 for their owner too, and two gateways with one key share sessions per principal', async () => {
    const p = await principals()
    const backends = [await closing(startLegacyV1Server()), await closing(startLegacyV1Server())]
    const gw1 = await gateway(p, backends, { balance: 'round-robin' })
    const gw2 = await gateway(p, backends, { balance: 'round-robin' })
    const init = await rawPost(gw1.mcpUrl('app'), LEGACY_INITIALIZE, {
      ...LEGACY,
      authorization: `Bearer ${p.alice}`,
    })
    expect(init.status).toBe(200)
    const id = String(init.headers['mcp-session-id'])
    const list = (token: string, sid: string, rid: number): Promise<RawResponse> =>
      rawPost(
        gw2.mcpUrl('app'),
        { jsonrpc: '2.0', id: rid, method: 'tools/list' },
        { ...LEGACY, authorization: `Bearer ${token}`, 'mcp-session-id': sid },
      )
    const seen = (): number => backends[0]!.requests.length + backends[1]!.requests.length
    const before = seen()
    const last = id.at(-3) === 'A' ? 'B' : 'A'
    expectSessionNotFound(await list(p.alice, `${id.slice(0, -3)}${last}${id.slice(-2)}`, 1), 1)
    expectSessionNotFound(await list(p.alice, `${id}x`, 2), 2)
    expectSessionNotFound(await list(p.bob, id, 3), 3)
    expect(seen()).toBe(before)
    const ok = await list(p.alice, id, 4) // the other gateway, the same key: Alice's session
    expect(ok.status).toBe(200)
    expect(ok.response().result?.['tools']).toEqual([expect.objectContaining({ name: 'echo' })])
  })

  it('an id opened anonymously does not work for an authenticated caller (and the reverse)', async () => {
    const p = await principals()
    const backend = await closing(startLegacyV1Server())
    const anonymous = await startTestGateway({
      legacySessions: { key: KEY },
      servers: { app: { upstreams: [{ url: backend.url }] } },
    })
    const authed = await gateway(p, [backend])
    const init = (gw: TestGateway, auth: Record<string, string>): Promise<RawResponse> =>
      rawPost(gw.mcpUrl('app'), LEGACY_INITIALIZE, { ...LEGACY, ...auth })
    const anonId = String((await init(anonymous, {})).headers['mcp-session-id'])
    const aliceId = String(
      (await init(authed, { authorization: `Bearer ${p.alice}` })).headers['mcp-session-id'],
    )
    const before = backend.requests.length
    const list = { jsonrpc: '2.0', id: 9, method: 'tools/list' }
    expectSessionNotFound(
      await rawPost(authed.mcpUrl('app'), list, {
        ...LEGACY,
        authorization: `Bearer ${p.alice}`,
        'mcp-session-id': anonId,
      }),
      9,
    )
    expectSessionNotFound(
      await rawPost(anonymous.mcpUrl('app'), list, { ...LEGACY, 'mcp-session-id': aliceId }),
      9,
    )
    expect(backend.requests.length).toBe(before)
    // Without auth the id is bound to nobody: whoever holds it is the session.
    expect(
      (await rawPost(anonymous.mcpUrl('app'), list, { ...LEGACY, 'mcp-session-id': anonId }))
        .status,
    ).toBe(200)
  })
})

const UPSTREAM_TASK = 'up-task-7f3a'
const TASK = {
  status: 'working',
  createdAt: '2026-11-30T10:00:00Z',
  lastUpdatedAt: '2026-11-30T10:00:00Z',
  ttlMs: 60000,
}
const EXT = { extensions: { 'io.modelcontextprotocol/tasks': {} } }

/** A backend that creates task UPSTREAM_TASK and knows only that one, on both revisions. */
const taskBackend: BehaviourHook = (_req, body) => {
  const m = body as { id: unknown; method: string; params?: Record<string, unknown> }
  const reply = (
    result: unknown,
  ): { status: number; headers: Record<string, string>; body: string } => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: m.id, result }),
  })
  const params = m.params ?? {}
  if (m.method === 'tools/call') {
    if (params['task'] !== undefined) return reply({ task: { taskId: UPSTREAM_TASK, ...TASK } })
    return reply({ resultType: 'task', taskId: UPSTREAM_TASK, ...TASK })
  }
  if (m.method === 'tasks/list')
    return reply({
      tasks: [
        { taskId: UPSTREAM_TASK, ...TASK },
        { taskId: 'someone-elses', ...TASK },
      ],
    })
  if (params['taskId'] !== UPSTREAM_TASK) {
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: m.id,
        error: { code: -32602, message: 'Failed to retrieve task: Task not found' },
      }),
    }
  }
  if (m.method === 'tasks/result') {
    return reply({
      content: [{ type: 'text', text: 'done' }],
      _meta: { 'io.modelcontextprotocol/related-task': { taskId: UPSTREAM_TASK } },
    })
  }
  if (m.method === 'tasks/update') return reply({ resultType: 'complete' })
  return reply({ resultType: 'complete', taskId: UPSTREAM_TASK, ...TASK })
}

async function taskSetup(server: Record<string, unknown> = {}) {
  const p = await principals()
  const backend = await closing(startNonValidatingBackend({ behaviour: taskBackend }))
  const gw = await gateway(p, [backend], server)
  const create = await mcpPost(
    gw.mcpUrl('app'),
    'tools/call',
    { name: 'render', arguments: {}, _meta: { 'io.modelcontextprotocol/clientCapabilities': EXT } },
    { auth: p.alice },
  )
  expect(create.status).toBe(200)
  const handle = create.response().result?.['taskId'] as string
  return { p, backend, gw, create, handle }
}

function taskRequest(
  gw: TestGateway,
  method: string,
  taskId: string,
  token: string,
  id: number | string = 3,
) {
  return mcpPost(
    gw.mcpUrl('app'),
    method,
    { taskId, ...(method === 'tasks/update' && { inputResponses: {} }) },
    { auth: token, id, headers: { 'mcp-name': taskId } },
  )
}

describe('task ids are sealed for the principal whose request created the task', () => {
  it.each([{}, { trustHeaders: true }])(
    '2026-07-28: the created id is sealed and opens for its creator only (server %o)',
    async (server) => {
      const { p, backend, gw, create, handle } = await taskSetup(server)
      expect(handle).toMatch(/^[A-Za-z0-9_-]{40,}$/)
      expect(create.text.includes(UPSTREAM_TASK)).toBe(false)
      expect(create.response().result).toMatchObject({ resultType: 'task', status: 'working' })
      // The creator: the backend gets its own id, in the body and in Mcp-Name.
      const get = await taskRequest(gw, 'tasks/get', handle, p.alice)
      expect(get.status).toBe(200)
      expect(get.response().result).toMatchObject({ taskId: handle, status: 'working' })
      const forwarded = backend.calls('tasks/get')
      expect(forwarded).toHaveLength(1)
      expect((forwarded[0]?.json() as { params: { taskId: string } }).params.taskId).toBe(
        UPSTREAM_TASK,
      )
      expect(forwarded[0]?.header('mcp-name')).toBe(UPSTREAM_TASK)
      for (const method of ['tasks/update', 'tasks/cancel']) {
        expect((await taskRequest(gw, method, handle, p.alice)).response().result).toBeDefined()
      }
      // Anyone else: the answer a server gives for an unknown task, and nothing is forwarded.
      const before = backend.requests.length
      for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
        const res = await taskRequest(gw, method, handle, p.bob, 'b-1')
        expect(res.status).toBe(200)
        expect(res.json()).toEqual({
          jsonrpc: '2.0',
          id: 'b-1',
          error: { code: -32602, message: 'Failed to retrieve task: Task not found' },
        })
        expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
      }
      // The backend's own id is not a key either, not even for the creator.
      const raw = await taskRequest(gw, 'tasks/get', UPSTREAM_TASK, p.alice, 4)
      expect(raw.response().error).toMatchObject({ code: -32602 })
      expect(backend.requests.length).toBe(before)
    },
  )

  it('2025-11-25: params.task creates, tasks/get, tasks/result and tasks/cancel carry sealed ids', async () => {
    const p = await principals()
    const backend = await closing(startNonValidatingBackend({ behaviour: taskBackend }))
    const gw = await gateway(p, [backend])
    const post = (token: string, body: object): Promise<RawResponse> =>
      rawPost(gw.mcpUrl('app'), body, { ...LEGACY, authorization: `Bearer ${token}` })
    const create = await post(p.alice, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'render', arguments: {}, task: { ttl: 60000 } },
    })
    const handle = (create.response().result?.['task'] as { taskId: string }).taskId
    expect(create.text.includes(UPSTREAM_TASK)).toBe(false)
    const result = await post(p.alice, {
      jsonrpc: '2.0',
      id: 2,
      method: 'tasks/result',
      params: { taskId: handle },
    })
    expect(result.response().result?.['_meta']).toEqual({
      'io.modelcontextprotocol/related-task': { taskId: handle },
    })
    const cancel = await post(p.alice, {
      jsonrpc: '2.0',
      id: 3,
      method: 'tasks/cancel',
      params: { taskId: handle },
    })
    expect(cancel.response().result?.['taskId']).toBe(handle)
    const before = backend.requests.length
    // A big integer id is echoed byte for byte in the in-band answer.
    const stolen = await rawPost(
      gw.mcpUrl('app'),
      `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tasks/result","params":{"taskId":"${handle}"}}`,
      { ...LEGACY, authorization: `Bearer ${p.bob}` },
    )
    expect(stolen.status).toBe(200)
    expect(stolen.text).toBe(
      '{"jsonrpc":"2.0","id":12345678901234567890,"error":{"code":-32602,"message":"Failed to retrieve task: Task not found"}}',
    )
    // tasks/list: the backend's list is not per principal, so an authenticated caller gets an
    // empty list and the backend is not asked.
    const list = await post(p.alice, { jsonrpc: '2.0', id: 5, method: 'tasks/list', params: {} })
    expect(list.response().result).toEqual({ tasks: [] })
    expect(backend.requests.length).toBe(before)
  })

  it('without auth, task ids are still sealed and tasks/list is relayed with sealed ids', async () => {
    const backend = await closing(startNonValidatingBackend({ behaviour: taskBackend }))
    const gw = await startTestGateway({ servers: { app: { upstreams: [{ url: backend.url }] } } })
    const list = await rawPost(
      gw.mcpUrl('app'),
      { jsonrpc: '2.0', id: 5, method: 'tasks/list', params: {} },
      LEGACY,
    )
    const ids = (list.response().result?.['tasks'] as { taskId: string }[]).map((t) => t.taskId)
    expect(ids).toHaveLength(2)
    expect(list.text.includes(UPSTREAM_TASK)).toBe(false)
    const get = await rawPost(
      gw.mcpUrl('app'),
      { jsonrpc: '2.0', id: 6, method: 'tasks/get', params: { taskId: ids[0] } },
      LEGACY,
    )
    expect(get.response().result?.['taskId']).toBe(ids[0])
    expect(
      (backend.calls('tasks/get')[0]?.json() as { params: { taskId: string } }).params.taskId,
    ).toBe(UPSTREAM_TASK)
  })

  it('refuses what a backend could read as another task id, forwarding nothing', async () => {
    const { p, backend, gw, handle } = await taskSetup()
    const before = backend.requests.length
    // A case variant a case-insensitive decoder could pick instead of the opened taskId.
    const variant = await mcpPost(
      gw.mcpUrl('app'),
      'tasks/get',
      { taskId: handle, TaskID: UPSTREAM_TASK },
      { auth: p.alice, id: 11, headers: { 'mcp-name': handle } },
    )
    expect(variant.status).toBe(400)
    expect(variant.json()).toMatchObject({
      id: 11,
      error: { code: -32600, data: { reason: 'case_variant_key' } },
    })
    // Mcp-Name naming something else than params.taskId.
    const mismatch = await mcpPost(
      gw.mcpUrl('app'),
      'tasks/get',
      { taskId: handle },
      { auth: p.alice, id: 12, headers: { 'mcp-name': UPSTREAM_TASK } },
    )
    expect(mismatch.status).toBe(400)
    expect(mismatch.json()).toMatchObject({
      id: 12,
      error: { code: -32020, data: { reason: 'header_mismatch' } },
    })
    // Task status subscriptions would name tasks by the backend's ids.
    const listen = await mcpPost(
      gw.mcpUrl('app'),
      'subscriptions/listen',
      { notifications: { taskIds: [UPSTREAM_TASK] } },
      { auth: p.bob, id: 13 },
    )
    expect(listen.status).toBe(400)
    expect(listen.json()).toMatchObject({
      id: 13,
      error: { code: -32602, data: { reason: 'invalid_params' } },
    })
    expect(backend.requests.length).toBe(before)
  })

  it('seals the id in a streamed (SSE) answer, and never relays one it cannot seal', async () => {
    const p = await principals()
    const long = 'x'.repeat(600)
    const backend = await closing(
      startNonValidatingBackend({
        behaviour: (_req, body) => {
          const { id, params } = body as { id: number; params: { name: string } }
          const taskId = params.name === 'long' ? long : UPSTREAM_TASK
          const result = { resultType: 'task', taskId, ...TASK }
          if (params.name === 'long') {
            return {
              status: 200,
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ jsonrpc: '2.0', id, result }),
            }
          }
          return {
            sse: [
              sseEvent({
                jsonrpc: '2.0',
                method: 'notifications/progress',
                params: { progressToken: 1, progress: 1 },
              }),
              sseEvent({ jsonrpc: '2.0', id, result }),
            ],
          }
        },
      }),
    )
    const gw = await gateway(p, [backend])
    const call = (name: string): Promise<RawResponse> =>
      mcpPost(
        gw.mcpUrl('app'),
        'tools/call',
        { name, arguments: {}, _meta: { 'io.modelcontextprotocol/clientCapabilities': EXT } },
        { auth: p.alice },
      )
    const streamed = await call('render')
    expect(streamed.headers['content-type']).toMatch(/^text\/event-stream/)
    expect(streamed.messages()).toHaveLength(2)
    const handle = streamed.response().result?.['taskId'] as string
    expect(streamed.text.includes(UPSTREAM_TASK)).toBe(false)
    expect(handle).toBe((await call('render')).response().result?.['taskId']) // one task, one id
    const tooLong = await call('long')
    expect(tooLong.status).toBe(502)
    expect(tooLong.json()).toMatchObject({ error: { data: { reason: 'upstream_bad_response' } } })
    expect(tooLong.text.includes(long)).toBe(false)
  })

  it('leaves a plain tools/call answer alone (no task requested, no rewriting)', async () => {
    const p = await principals()
    const answer =
      '{"jsonrpc":"2.0","id":1,"result":{"content":[],"taskId":"not-a-task","resultType":"complete"}}'
    const backend = await closing(
      startNonValidatingBackend({
        behaviour: () => ({
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: answer,
        }),
      }),
    )
    const gw = await gateway(p, [backend])
    const res = await mcpPost(
      gw.mcpUrl('app'),
      'tools/call',
      { name: 'echo', arguments: {} },
      { auth: p.alice },
    )
    expect(res.text).toBe(answer)
  })
})
