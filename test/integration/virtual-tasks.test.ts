import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks'
import { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport as V1ServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import {
  CallToolResultSchema,
  isInitializeRequest,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js'
import { describe, expect, it } from 'vitest'
import * as z from 'zod'
import { startWeatherServer } from '../../deploy/demo/weather-server.js'
import { connectLegacyClient, mcpPost, rawPost, type RawResponse } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startNonValidatingBackend, sseEvent, type BehaviourHook } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

// Tasks through a virtual server (docs/virtual-servers.md "Tasks"): the task id a client gets names
// the member inside a sealed handle bound to the caller and the virtual server; follow-ups go to
// that member with its own id, and anything else is an unknown task with nothing forwarded.

const KEY = 'a-test-key-of-at-least-16-chars'
const NOT_FOUND = { code: -32602, message: 'Failed to retrieve task: Task not found' }

// ---------------------------------------------------------------------------------------------
// A task-capable official SDK server (v1, 2025-11-25, experimental tasks)

interface TaskServer {
  readonly url: string
  /** JSON-RPC bodies in arrival order. */
  readonly bodies: Record<string, unknown>[]
  /** Task ids the server created. */
  readonly created: string[]
  close(): Promise<void>
}

/** A v1 SDK server with a shared task store and one task tool, `render`, that completes at once. */
async function startTaskServer(): Promise<TaskServer> {
  const store = new InMemoryTaskStore()
  const bodies: Record<string, unknown>[] = []
  const created: string[] = []
  const sessions = new Map<string, V1ServerTransport>()
  const servers: V1McpServer[] = []
  const newServer = (): V1McpServer => {
    const server = new V1McpServer(
      { name: 'jobs', version: '1.0.0' },
      {
        capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        taskStore: store,
      },
    )
    server.experimental.tasks.registerToolTask(
      'render',
      {
        description: 'Renders text as a task',
        inputSchema: { text: z.string() },
        execution: { taskSupport: 'required' },
      },
      {
        async createTask({ text }, extra) {
          const task = await extra.taskStore.createTask({ ttl: 60_000 })
          created.push(task.taskId)
          await extra.taskStore.storeTaskResult(task.taskId, 'completed', {
            content: [{ type: 'text', text: `rendered: ${text}` }],
          })
          return { task }
        },
        getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
        getTaskResult: async (_args, extra) =>
          (await extra.taskStore.getTaskResult(extra.taskId)) as CallToolResult,
      },
    )
    servers.push(server)
    return server
  }
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const body = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>)
      if (body !== undefined) bodies.push(body)
      const id = req.headers['mcp-session-id']
      const transport = typeof id === 'string' ? sessions.get(id) : undefined
      if (transport !== undefined) return void transport.handleRequest(req, res, body)
      if (req.method !== 'POST' || !isInitializeRequest(body)) {
        res.writeHead(typeof id === 'string' ? 404 : 400, { 'content-type': 'application/json' })
        return void res.end(
          '{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"no session"}}',
        )
      }
      const t: V1ServerTransport = new V1ServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void sessions.set(sid, t),
      })
      void newServer()
        .connect(t)
        .then(() => t.handleRequest(req, res, body))
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const port = (http.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    bodies,
    created,
    async close() {
      await Promise.all(servers.map((s) => s.close()))
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}

const calls = (s: TaskServer, method: string) => s.bodies.filter((b) => b['method'] === method)

describe('tasks through a virtual server, official SDK (v1 client, v1 task server as a member)', () => {
  it('creates a task by tools/call, polls it and gets its result; ids are sealed with the member', async () => {
    const jobs = await closing(startTaskServer())
    const weather = await closing(startWeatherServer())
    const gw = await startTestGateway({
      legacySessions: { key: KEY },
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        jobs: { upstreams: [{ url: jobs.url }] },
      },
      virtualServers: { workspace: { members: ['weather', 'jobs'] } },
    })
    const client = await closing(connectLegacyClient(gw.mcpUrl('workspace')))
    // The member's task capability is offered through the virtual server.
    expect(client.getServerCapabilities()?.tasks).toMatchObject({
      requests: { tools: { call: {} } },
    })
    await client.listTools()
    const messages: { type: string; [k: string]: unknown }[] = []
    const stream = client.experimental.tasks.callToolStream(
      { name: 'render', arguments: { text: 'hi' } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    )
    for await (const m of stream) messages.push(m as { type: string })
    expect(messages.map((m) => m.type)).toContain('taskCreated')
    const created = messages.find((m) => m.type === 'taskCreated') as unknown as {
      task: { taskId: string }
    }
    const handle = created.task.taskId
    const result = messages.at(-1) as unknown as { type: string; result: object }
    expect(result.type).toBe('result')
    expect(textOf(result.result)).toBe('rendered: hi')
    // The client holds a sealed handle; the member got its own id on every follow-up.
    const own = jobs.created[0] as string
    expect(own).toBeDefined()
    expect(handle).not.toBe(own)
    expect(handle.includes(own)).toBe(false)
    const status = await client.experimental.tasks.getTask(handle)
    expect(status).toMatchObject({ taskId: handle, status: 'completed' })
    const payload = await client.experimental.tasks.getTaskResult(handle, CallToolResultSchema)
    expect(textOf(payload)).toBe('rendered: hi')
    const followUps = [...calls(jobs, 'tasks/get'), ...calls(jobs, 'tasks/result')]
    expect(followUps.length).toBeGreaterThanOrEqual(2)
    for (const b of followUps) expect((b['params'] as { taskId: string }).taskId).toBe(own)
    // tasks/list without auth: the members' lists, merged, each id sealed with its member.
    const list = await client.experimental.tasks.listTasks()
    expect(list.tasks.map((t) => t.taskId)).toEqual([handle])
    // The member's own id is not a handle: an unknown task, and the member is not asked.
    const before = jobs.bodies.length
    await expect(client.experimental.tasks.getTask(own)).rejects.toThrow(/Task not found/)
    expect(jobs.bodies.length).toBe(before)
  })
})

// ---------------------------------------------------------------------------------------------
// Raw 2026-07-28 requests against a hand-written task member, with auth

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const MEMBER_TASK = 'member-task-9c1e'
const TASK = {
  status: 'working',
  createdAt: '2026-11-30T10:00:00Z',
  lastUpdatedAt: '2026-11-30T10:00:00Z',
  ttlMs: 60000,
}
const EXT = {
  'io.modelcontextprotocol/clientCapabilities': {
    extensions: { 'io.modelcontextprotocol/tasks': {} },
  },
}

/** Creates MEMBER_TASK and knows only that one; tasks/get answers over SSE with a status notification. */
const taskMember: BehaviourHook = (req, body) => {
  const m = body as { method: string; params?: Record<string, unknown> }
  // The id exactly as sent (a big integer would be rounded by JSON.parse).
  const id = /"id":(-?\d+|"[^"]*")/.exec(req.body.toString('utf8'))?.[1] ?? 'null'
  const frame = (payload: object) =>
    `{"jsonrpc":"2.0","id":${id},${JSON.stringify(payload).slice(1, -1)}}`
  const json = (payload: object) => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: frame(payload),
  })
  const params = m.params ?? {}
  if (m.method === 'tools/call' && params['name'] === 'render')
    return json({ result: { resultType: 'task', taskId: MEMBER_TASK, ...TASK } })
  if (!m.method.startsWith('tasks/')) return 'normal'
  if (params['taskId'] !== MEMBER_TASK) return json({ error: NOT_FOUND })
  if (m.method === 'tasks/get')
    return {
      sse: [
        sseEvent({
          jsonrpc: '2.0',
          method: 'notifications/progress',
          params: { progressToken: 1, progress: 1 },
        }),
        `event: message\ndata: ${frame({ result: { resultType: 'complete', taskId: MEMBER_TASK, ...TASK } })}\n\n`,
      ],
    }
  return json({ result: { resultType: 'complete' } })
}

async function authSetup() {
  const key = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const aud = ['workspace', 'other', 'app'].map((n) => `${PUBLIC}/mcp/${n}`)
  const mint = (sub: string): Promise<string> => mintToken(claimsFor(ISS, aud, { sub }), { key })
  const member = await closing(
    startNonValidatingBackend({ behaviour: taskMember, tools: ['render'] }),
  )
  const weather = await closing(startWeatherServer())
  const gw = await startTestGateway({
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
    legacySessions: { key: KEY },
    servers: {
      app: { upstreams: [{ url: member.url }] },
      weather: { upstreams: [{ url: weather.url }] },
    },
    virtualServers: {
      workspace: { members: ['weather', 'app'] },
      other: { members: ['app', 'weather'] },
    },
  })
  const alice = await mint('alice')
  const bob = await mint('bob')
  return { gw, member, alice, bob }
}

function create(gw: TestGateway, at: string, token: string): Promise<RawResponse> {
  return mcpPost(
    gw.mcpUrl(at),
    'tools/call',
    { name: 'render', arguments: {}, _meta: EXT },
    { auth: token },
  )
}

function taskCall(
  gw: TestGateway,
  at: string,
  method: string,
  taskId: string,
  token: string,
  id: number | string = 3,
): Promise<RawResponse> {
  return mcpPost(
    gw.mcpUrl(at),
    method,
    { taskId, ...(method === 'tasks/update' && { inputResponses: {} }) },
    { auth: token, id, headers: { 'mcp-name': taskId } },
  )
}

function expectUnknownTask(res: RawResponse, id: unknown): void {
  expect(res.status).toBe(200)
  expect(res.json()).toEqual({ jsonrpc: '2.0', id, error: NOT_FOUND })
  expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
}

describe('task ids through a virtual server (2026-07-28, raw)', () => {
  it('routes follow-ups to the member with its own id, byte for byte, and re-seals answers', async () => {
    const { gw, member, alice } = await authSetup()
    const made = await create(gw, 'workspace', alice)
    expect(made.status).toBe(200)
    expect(made.text.includes(MEMBER_TASK)).toBe(false)
    const handle = made.response().result?.['taskId'] as string
    expect(made.response().result).toMatchObject({ resultType: 'task', status: 'working' })
    expect(handle).toMatch(/^[A-Za-z0-9_-]{40,}$/)
    // The client's bytes, with only params.taskId replaced (a big-integer id included).
    const text = `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tasks/get","params":{"taskId":"${handle}","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","x":1.50}}}`
    const get = await rawPost(gw.mcpUrl('workspace'), text, {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tasks/get',
      'mcp-name': handle,
      authorization: `Bearer ${alice}`,
    })
    expect(get.status).toBe(200)
    // SSE: the progress notification passes, the response is re-sealed under the client's id.
    expect(get.text).toContain('notifications/progress')
    expect(get.text.includes(MEMBER_TASK)).toBe(false)
    expect(get.text).toContain('"id":12345678901234567890')
    expect(get.response().result).toMatchObject({ taskId: handle, status: 'working' })
    const forwarded = member.calls('tasks/get')
    expect(forwarded).toHaveLength(1)
    expect(forwarded[0]?.body.toString('utf8')).toBe(text.replace(handle, MEMBER_TASK))
    expect(forwarded[0]?.header('mcp-name')).toBe(MEMBER_TASK)
    for (const method of ['tasks/update', 'tasks/cancel']) {
      const res = await taskCall(gw, 'workspace', method, handle, alice)
      expect(res.response().result).toEqual({ resultType: 'complete' })
      expect(
        (member.calls(method)[0]?.json() as { params: { taskId: string } }).params.taskId,
      ).toBe(MEMBER_TASK)
    }
  })

  it('refuses another caller, another virtual server, the member endpoint, forged and raw ids; nothing forwarded', async () => {
    const { gw, member, alice, bob } = await authSetup()
    const handle = (await create(gw, 'workspace', alice)).response().result?.['taskId'] as string
    const direct = (await create(gw, 'app', alice)).response().result?.['taskId'] as string
    const elsewhere = (await create(gw, 'other', alice)).response().result?.['taskId'] as string
    expect(new Set([handle, direct, elsewhere]).size).toBe(3)
    const before = member.requests.length
    const forged = `${handle.slice(0, -2)}${handle.endsWith('AA') ? 'AB' : 'AA'}`
    const attempts: [string, string, string][] = [
      ['workspace', handle, bob], // another caller
      ['other', handle, alice], // another virtual server
      ['app', handle, alice], // the member's own endpoint
      ['workspace', direct, alice], // the member endpoint's handle on the virtual server
      ['workspace', elsewhere, alice], // another virtual server's handle
      ['workspace', forged, alice],
      ['workspace', MEMBER_TASK, alice], // the member's own id
    ]
    for (const [at, id, token] of attempts) {
      for (const method of ['tasks/get', 'tasks/cancel']) {
        expectUnknownTask(await taskCall(gw, at, method, id, token, 'x-9'), 'x-9')
      }
    }
    expect(member.requests.length).toBe(before)
    // What a case-insensitive member could read as another task id, or a header naming another.
    const variant = await mcpPost(
      gw.mcpUrl('workspace'),
      'tasks/get',
      { taskId: handle, TaskID: MEMBER_TASK },
      { auth: alice, id: 11, headers: { 'mcp-name': handle } },
    )
    expect(variant.status).toBe(400)
    expect(variant.json()).toMatchObject({
      id: 11,
      error: { data: { reason: 'case_variant_key' } },
    })
    const mismatch = await mcpPost(
      gw.mcpUrl('workspace'),
      'tasks/get',
      { taskId: handle },
      { auth: alice, id: 12, headers: { 'mcp-name': MEMBER_TASK } },
    )
    expect(mismatch.status).toBe(400)
    expect(mismatch.json()).toMatchObject({
      id: 12,
      error: { code: -32020, data: { reason: 'header_mismatch' } },
    })
    expect(member.requests.length).toBe(before)
  })
})
