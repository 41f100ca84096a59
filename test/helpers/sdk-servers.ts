import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import {
  McpServer,
  ProtocolError,
  ProtocolErrorCode,
  createMcpHandler,
  type McpHttpHandler,
  type RegisteredTool,
  type ServerNotifier,
  type Tool,
} from '@modelcontextprotocol/server'
import { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport as V1Transport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js'
import * as z from 'zod'
import { registerDocsPrompts, registerDocsResources } from '../../deploy/demo/docs-server.js'
import {
  MCP_PATH,
  httpUrl,
  listen,
  pathOf,
  nodeServing,
  type CacheHints,
} from '../../deploy/demo/serve.js'
import { registerWeatherTools } from '../../deploy/demo/weather-server.js'

/** One HTTP request exactly as it reached a test server, before any MCP code saw it. */
export interface RecordedRequest {
  readonly method: string
  readonly url: string
  /** Names and values in wire order and case: [name0, value0, name1, value1, …]. */
  readonly rawHeaders: readonly string[]
  readonly body: Buffer
  /** performance.now() once the body had been read. */
  readonly time: number
  /** The JSON-RPC method when the body is a single JSON-RPC message. */
  readonly rpcMethod: string | undefined
  /** The first value of a header, matched case-insensitively. */
  header(name: string): string | undefined
  /** The body parsed as JSON; throws when it is not JSON. */
  json(): unknown
}

/** What every test server returns. */
export interface TestServer {
  /** Full endpoint URL, http://127.0.0.1:<port>/mcp. */
  readonly url: string
  readonly port: number
  /** Every request that reached the server, oldest first (a live array). */
  readonly requests: RecordedRequest[]
  /** The recorded requests whose JSON-RPC method is `method`. */
  calls(method: string): RecordedRequest[]
  /** Pushes change events to whoever listens (listen streams, or GET streams on older servers). */
  readonly notify: ServerNotifier
  /** Closes the server and every socket it holds; safe to call twice. */
  close(): Promise<void>
}

/** Options of {@link startSdkServer}. */
export interface SdkServerOptions {
  /** serverInfo.name, e.g. to tell load-balanced upstreams apart (default 'test-sdk'). */
  readonly name?: string
  /** How 2025-era requests are served (default 'stateless'). */
  readonly legacy?: 'stateless' | 'reject'
  /** ttlMs / cacheScope per cacheable method (default none: 0 / private). */
  readonly cacheHints?: CacheHints
  /** Serve tools/list in pages of this size, offset cursors "2", "4", … (default: one page). */
  readonly toolsPageSize?: number
  /** Response shaping of modern requests (default 'auto'). */
  readonly responseMode?: 'auto' | 'sse' | 'json'
  /** More tools (each answers its own name), read live: push a name, then notify.toolsChanged(). */
  readonly extraTools?: readonly string[]
  /** Tool descriptions in place of the demo's, read live (a backend that changes a definition). */
  readonly descriptions?: Readonly<Record<string, string>>
  /**
   * tools/list shows `confirm_action` (which asks the user through an elicitation) only to a
   * client whose request declares the `elicitation` capability: a backend that shapes its list by
   * what the client can do (spec 2026-07-28: capabilities travel with every request).
   */
  readonly toolsByCapability?: boolean
  /**
   * tools/list sends this many 64 KiB log notifications on its answer's stream before the list
   * (a backend that reports as it works; with responseMode 'sse').
   */
  readonly listNotes?: number
  /** Holds each request, once recorded, until the promise settles (a backend still at work). */
  readonly hold?: (request: RecordedRequest) => Promise<void> | undefined
  /** The server's `instructions`, read at every request (a backend that changes them). */
  readonly instructions?: () => string | undefined
}

/** A v2 SDK server with the demo tools, resources and prompts. */
export interface SdkTestServer extends TestServer {
  readonly handler: McpHttpHandler
  /** How many slow_forecast calls stopped early because their request was aborted. */
  readonly abortedCalls: number
  /** Resolves once `abortedCalls` has reached `count` (default 1); rejects after `timeoutMs`. */
  waitForAborts(count?: number, timeoutMs?: number): Promise<void>
}

/** The tools of {@link startSdkServer}, in tools/list order. */
export const SDK_SERVER_TOOLS = [
  'get_forecast',
  'get_alerts',
  'slow_forecast',
  'confirm_action',
  'delete_station',
  'whoami',
] as const

const EMPTY_HINTS: CacheHints = {}

/**
 * Starts a 2026-07-28 server on 127.0.0.1:0: tools {@link SDK_SERVER_TOOLS}, resources
 * docs://readme, docs://changelog, template docs://pages/{name}, prompts summarize and review,
 * completion and listen.
 */
export async function startSdkServer(options: SdkServerOptions = {}): Promise<SdkTestServer> {
  const name = options.name ?? 'test-sdk'
  let aborted = 0
  const waiters = new Set<{ readonly count: number; wake: () => void }>()
  const onAbort = (): void => {
    aborted++
    for (const waiter of waiters) if (aborted >= waiter.count) waiter.wake()
  }
  const handler = createMcpHandler(
    () => {
      const server = new McpServer(
        { name, version: '1.0.0' },
        {
          cacheHints: options.cacheHints ?? EMPTY_HINTS,
          // without subscribe:true, listen streams drop resourceSubscriptions from the filter
          capabilities: {
            resources: { subscribe: true },
            ...(options.listNotes !== undefined && { logging: {} }),
          },
          ...withInstructions(options.instructions?.()),
        },
      )
      const tools = registerWeatherTools(server, { onAbort })
      tools['whoami'] = server.registerTool('whoami', { description: 'Names the server' }, () => ({
        content: [{ type: 'text', text: name }],
      }))
      for (const extra of options.extraTools ?? [])
        tools[extra] = server.registerTool(extra, { description: 'Added at run time' }, () => ({
          content: [{ type: 'text', text: extra }],
        }))
      for (const [tool, description] of Object.entries(options.descriptions ?? {}))
        tools[tool]?.update({ description })
      registerDocsResources(server)
      registerDocsPrompts(server)
      if (
        options.toolsPageSize !== undefined ||
        options.toolsByCapability === true ||
        options.listNotes !== undefined
      )
        listTools(
          server,
          tools,
          options.toolsPageSize,
          options.toolsByCapability === true,
          options.listNotes ?? 0,
        )
      return server
    },
    { legacy: options.legacy ?? 'stateless', responseMode: options.responseMode ?? 'auto' },
  )
  const node = nodeServing(handler)
  const http = await startRecording(async (req, res, rec) => {
    await options.hold?.(rec)
    await node(req, res, rec.body)
  })
  return {
    ...http,
    handler,
    notify: handler.notify,
    get abortedCalls() {
      return aborted
    },
    waitForAborts(count = 1, timeoutMs = 5_000) {
      if (aborted >= count) return Promise.resolve()
      const waiter = { count, wake: () => {} }
      const reached = new Promise<void>((resolve) => {
        waiter.wake = resolve
        waiters.add(waiter)
      })
      const done = withTimeout(reached, timeoutMs, `${count} aborted call(s)`)
      return done.finally(() => void waiters.delete(waiter))
    },
    async close() {
      await handler.close()
      await http.close()
    },
  }
}

/**
 * Replaces McpServer's tools/list with one that pages through the same tools (`size` a page,
 * offset cursors; one page when undefined) and, `byCapability`, shows `confirm_action` only to a
 * client that declared elicitation.
 */
function listTools(
  server: McpServer,
  tools: Record<string, RegisteredTool>,
  size: number | undefined,
  byCapability: boolean,
  notes: number,
): void {
  server.server.setRequestHandler('tools/list', async (request, ctx) => {
    for (let i = 0; i < notes; i++)
      await ctx.mcpReq.notify({
        method: 'notifications/message',
        params: { level: 'info', data: 'n'.repeat(64 * 1024) },
      })
    const elicits = server.server.getClientCapabilities()?.elicitation !== undefined
    const all = Object.entries(tools)
      .filter(
        ([name, tool]) => tool.enabled && (elicits || !byCapability || name !== 'confirm_action'),
      )
      .map(([name, tool]): Tool => ({
        name,
        ...(tool.title !== undefined && { title: tool.title }),
        ...(tool.description !== undefined && { description: tool.description }),
        inputSchema: { type: 'object', ...server.toolInputSchemaJson(name) },
        ...(tool.annotations !== undefined && { annotations: tool.annotations }),
      }))
    const cursor = request.params?.cursor
    const start = cursor === undefined ? 0 : Number(cursor)
    if (!Number.isInteger(start) || start < 0 || start > all.length) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid cursor: ${cursor}`)
    }
    const end = start + (size ?? all.length)
    return { tools: all.slice(start, end), ...(end < all.length && { nextCursor: String(end) }) }
  })
}

/** `{instructions}` when there are some (server options take no explicit undefined). */
function withInstructions(text: string | undefined): { instructions?: string } {
  return text === undefined ? {} : { instructions: text }
}

/** The 2025-era test server: a {@link TestServer} whose tools can change. */
export interface LegacyTestServer extends TestServer {
  /**
   * Registers tool `name` (answering `name`) on every session's server, which makes each send
   * `notifications/tools/list_changed` on its GET stream (the SDK does on registerTool), and on
   * sessions opened later.
   */
  addTool(name: string): void
  /** Lets the `progress` calls waiting now return their result. */
  finishProgress(): void
}

/**
 * Starts a 2025-era stateful server (SDK v1, Mcp-Session-Id, GET stream, DELETE) with an `echo`
 * tool, a `legacy://info` resource and a `hello` prompt; with `progress`, also a `progress` tool
 * (a progress notification, then its result at the next finishProgress(), or after 5 s).
 */
export async function startLegacyV1Server(
  options: {
    /**
     * `'session'`: the tool's progress goes on the session's GET stream (no related request, as
     * mcp-framework sends it), after one for `foreignProgress`, a token no request of the session
     * carries (another session's, from a server that broadcasts progress to every session).
     */
    readonly progress?: boolean | 'session'
    readonly foreignProgress?: string
    /** The server's `instructions`, read at every `initialize` (a backend that changes them). */
    readonly instructions?: () => string | undefined
  } = {},
): Promise<LegacyTestServer> {
  const sessions = new Map<string, { transport: V1Transport; server: V1McpServer }>()
  const added: string[] = []
  const gate: Gate & { readonly tool: boolean } = {
    waiters: new Set(),
    tool: options.progress !== undefined && options.progress !== false,
    onSession: options.progress === 'session',
    foreign: options.foreignProgress,
  }
  const http = await startRecording(async (req, res, rec) => {
    const sessionId = rec.header('mcp-session-id')
    const session = sessionId === undefined ? undefined : sessions.get(sessionId)
    const body = parseJson(rec.body)
    if (session !== undefined) return session.transport.handleRequest(req, res, body)
    if (sessionId !== undefined) return sendRpcError(res, 404, -32001, 'Session not found')
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      return sendRpcError(res, 400, -32000, 'Bad Request: No valid session ID provided')
    }
    const server = createV1Server(gate, options.instructions?.())
    for (const name of added) addTool(server, name)
    const transport: V1Transport = new V1Transport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
    })
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId)
    }
    await server.connect(transport)
    // the body was read by the recorder, so the transport must get it pre-parsed
    return transport.handleRequest(req, res, body)
  })
  const each = (send: (server: V1McpServer) => unknown): void => {
    for (const { server } of sessions.values()) void send(server)
  }
  return {
    ...http,
    notify: {
      toolsChanged: () => each((s) => s.sendToolListChanged()),
      promptsChanged: () => each((s) => s.sendPromptListChanged()),
      resourcesChanged: () => each((s) => s.sendResourceListChanged()),
      resourceUpdated: (uri) => each((s) => s.server.sendResourceUpdated({ uri })),
    },
    addTool(name) {
      added.push(name)
      each((s) => addTool(s, name))
    },
    finishProgress() {
      for (const wake of gate.waiters) wake()
    },
    async close() {
      await Promise.all([...sessions.values()].map(({ server }) => server.close()))
      await http.close()
    },
  }
}

function addTool(server: V1McpServer, name: string): void {
  server.registerTool(name, { description: `Added at run time: ${name}` }, () => ({
    content: [{ type: 'text', text: name }],
  }))
}

function createV1Server(
  gate: Gate & { readonly tool: boolean },
  instructions: string | undefined,
): V1McpServer {
  const server = new V1McpServer(
    { name: 'legacy-v1', version: '1.0.0' },
    withInstructions(instructions),
  )
  server.registerTool(
    'echo',
    { description: 'Echo text back', inputSchema: { text: z.string() } },
    ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
  )
  if (gate.tool) registerProgressTool(server, gate)
  server.registerResource('info', 'legacy://info', { mimeType: 'text/plain' }, (uri) => ({
    contents: [{ uri: uri.href, text: 'a 2025-era server' }],
  }))
  server.registerPrompt('hello', { description: 'Says hello' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }],
  }))
  return server
}

type Gate = {
  readonly waiters: Set<() => void>
  readonly onSession?: boolean
  readonly foreign?: string | undefined
}

/**
 * `progress`: one progress notification, then the result once the gate opens (or after 5 s); the
 * result's text is the call's progress token (as `String(token)`), or `progressed` without one.
 */
function registerProgressTool(server: V1McpServer, gate: Gate): void {
  server.registerTool('progress', { description: 'Progress, then a result' }, async (extra) => {
    const token = extra._meta?.progressToken
    const note = (progressToken: string | number, progress: number) => ({
      method: 'notifications/progress' as const,
      params: { progressToken, progress, total: 2 },
    })
    if (token !== undefined && gate.onSession === true) {
      // no related request: the SDK sends these on the session's standalone GET stream
      if (gate.foreign !== undefined) await server.server.notification(note(gate.foreign, 99))
      await server.server.notification(note(token, 1))
    } else if (token !== undefined) await extra.sendNotification(note(token, 1))
    await new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer)
        gate.waiters.delete(wake)
        resolve()
      }
      const timer = setTimeout(wake, 5_000)
      gate.waiters.add(wake)
    })
    // Echoes the token, as the conformance suite's reference tool does.
    const text = token === undefined ? 'progressed' : String(token)
    return { content: [{ type: 'text', text }] }
  })
}

/** How the non-validating backend answers one request. */
export type Behaviour =
  /** The built-in JSON answer. */
  | 'normal'
  /** TCP reset (RST) without any response. */
  | 'reset'
  /** Never answer (a black hole) until the client gives up or the server closes. */
  | 'hang'
  /** Bytes that are not HTTP, then close. */
  | 'garbage'
  /** This exact response. */
  | {
      readonly status: number
      readonly headers?: Readonly<Record<string, string>>
      readonly body?: string
    }
  /** 200 text/event-stream, each raw chunk `intervalMs` apart; `end: false` keeps it open. */
  | { readonly sse: readonly string[]; readonly intervalMs?: number; readonly end?: boolean }
  /** The built-in answer after a delay. */
  | { readonly delayMs: number }

/** Picks the behaviour for a request; `body` is the parsed JSON body (undefined if not JSON). */
export type BehaviourHook = (req: RecordedRequest, body: unknown) => Behaviour | Promise<Behaviour>

/** Options of {@link startNonValidatingBackend}. */
export interface BackendOptions {
  readonly behaviour?: BehaviourHook
  /** Names in the fixed tools/list (default echo, search, delete_repo). */
  readonly tools?: readonly string[]
  /** ttlMs / cacheScope put on the tools/list result (default none). */
  readonly toolsListCache?: { readonly ttlMs: number; readonly cacheScope: 'public' | 'private' }
}

/** The hand-written backend; its behaviour can be swapped mid-test. */
export interface NonValidatingBackend extends TestServer {
  setBehaviour(hook: BehaviourHook): void
}

/** One SSE `message` frame carrying `message` as JSON. */
export function sseEvent(message: unknown): string {
  return `event: message\ndata: ${JSON.stringify(message)}\n\n`
}

/**
 * Starts a plain node:http MCP-ish server that trusts whatever it gets: no header/body checks, any
 * tools/call "runs" params.name. For proving what the gateway let through, and for faults.
 */
export async function startNonValidatingBackend(
  options: BackendOptions = {},
): Promise<NonValidatingBackend> {
  let hook: BehaviourHook = options.behaviour ?? (() => 'normal')
  const streams = new Set<ServerResponse>()
  const answer = (message: Record<string, unknown>): Record<string, unknown> | undefined =>
    answerNormally(message, options)
  const http = await startRecording(async (req, res, rec) => {
    const body = parseJson(rec.body)
    const behaviour = await hook(rec, body)
    if (behaviour === 'normal') return replyNormally(req, res, body, streams, answer)
    if (behaviour === 'hang') return
    if (behaviour === 'reset') return void req.socket.resetAndDestroy()
    if (behaviour === 'garbage')
      return void req.socket.end('\x00\x01 this is not HTTP \xff\r\n\r\n')
    if ('delayMs' in behaviour) {
      const timer = setTimeout(
        () => replyNormally(req, res, body, streams, answer),
        behaviour.delayMs,
      )
      res.once('close', () => clearTimeout(timer))
      return
    }
    if ('sse' in behaviour) return writeSse(res, behaviour)
    res.writeHead(behaviour.status, { ...behaviour.headers }).end(behaviour.body ?? '')
  })
  const push = (method: string, params?: Record<string, unknown>): void => {
    const frame = sseEvent({ jsonrpc: '2.0', method, ...(params !== undefined && { params }) })
    for (const stream of streams) stream.write(frame)
  }
  return {
    ...http,
    setBehaviour: (next) => void (hook = next),
    notify: {
      toolsChanged: () => push('notifications/tools/list_changed'),
      promptsChanged: () => push('notifications/prompts/list_changed'),
      resourcesChanged: () => push('notifications/resources/list_changed'),
      resourceUpdated: (uri) => push('notifications/resources/updated', { uri }),
    },
    async close() {
      for (const stream of streams) stream.end()
      await http.close()
    },
  }
}

type Answer = (message: Record<string, unknown>) => Record<string, unknown> | undefined

function replyNormally(
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  streams: Set<ServerResponse>,
  answer: Answer,
): void {
  if (res.destroyed) return
  if (req.method === 'GET' && (req.headers.accept ?? '').includes('text/event-stream')) {
    // a standalone notification stream, like a 2025-era server's
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    res.flushHeaders()
    streams.add(res)
    res.once('close', () => streams.delete(res))
    return
  }
  if (req.method !== 'POST') return sendRpcError(res, 405, -32000, 'Method not allowed.')
  if (body === undefined) return sendRpcError(res, 400, -32700, 'Parse error')
  const messages = Array.isArray(body) ? body : [body]
  const replies = messages
    .filter(isObject)
    .map(answer)
    .filter((r) => r !== undefined)
  if (replies.length === 0) return void res.writeHead(202).end()
  const payload = Array.isArray(body) ? replies : replies[0]
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(payload))
}

function answerNormally(
  message: Record<string, unknown>,
  options: BackendOptions,
): Record<string, unknown> | undefined {
  const { id, method } = message
  if (id === undefined || typeof method !== 'string') return undefined // notification or response
  const params = isObject(message['params']) ? message['params'] : {}
  const name = typeof params['name'] === 'string' ? params['name'] : undefined
  const reply = (result: Record<string, unknown>) => ({ jsonrpc: '2.0', id, result })
  const serverInfo = { name: 'non-validating', version: '1.0.0' }
  switch (method) {
    case 'initialize':
      return reply({
        protocolVersion: params['protocolVersion'] ?? '2025-11-25',
        capabilities: { tools: { listChanged: true } },
        serverInfo,
      })
    case 'server/discover':
      return reply({
        supportedVersions: ['2026-07-28'],
        capabilities: { tools: { listChanged: true } },
        resultType: 'complete',
        _meta: { 'io.modelcontextprotocol/serverInfo': serverInfo },
      })
    case 'tools/list':
      return reply({
        tools: (options.tools ?? ['echo', 'search', 'delete_repo']).map((tool) => ({
          name: tool,
          description: `fake ${tool}`,
          inputSchema: { type: 'object' },
        })),
        resultType: 'complete',
        ...options.toolsListCache,
      })
    default:
      return reply({
        content: [{ type: 'text', text: `ran ${name ?? method}` }],
        resultType: 'complete',
      })
  }
}

function writeSse(
  res: ServerResponse,
  {
    sse,
    intervalMs = 0,
    end = true,
  }: { sse: readonly string[]; intervalMs?: number; end?: boolean },
): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  res.flushHeaders()
  let timer: NodeJS.Timeout | undefined
  res.once('close', () => clearTimeout(timer))
  const writeFrom = (index: number): void => {
    if (res.destroyed) return
    const chunk = sse[index]
    if (chunk === undefined) {
      if (end) res.end()
      return
    }
    res.write(chunk)
    timer = setTimeout(() => writeFrom(index + 1), intervalMs)
  }
  writeFrom(0)
}

type RecordedHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  rec: RecordedRequest,
) => void | Promise<void>

/** Listens on 127.0.0.1:0, records each request with its full body, then hands it on. */
export async function startRecording(handle: RecordedHandler): Promise<Omit<TestServer, 'notify'>> {
  const requests: RecordedRequest[] = []
  const listening = await listen((req, res) => {
    void (async () => {
      const rec = await readRequest(req)
      requests.push(rec)
      if (pathOf(req.url) !== MCP_PATH) return void res.writeHead(404).end()
      await handle(req, res, rec)
    })().catch((error: unknown) => {
      if (!res.headersSent) sendRpcError(res, 500, -32603, String(error))
      else res.destroy()
    })
  })
  return {
    url: httpUrl(listening.host, listening.port),
    port: listening.port,
    requests,
    calls: (method) => requests.filter((r) => r.rpcMethod === method),
    close: listening.close,
  }
}

async function readRequest(req: IncomingMessage): Promise<RecordedRequest> {
  const chunks: Buffer[] = []
  try {
    for await (const chunk of req) chunks.push(chunk as Buffer)
  } catch {
    // the client went away mid-body: keep what arrived
  }
  const body = Buffer.concat(chunks)
  const parsed = parseJson(body)
  const rawHeaders = [...req.rawHeaders]
  return {
    method: req.method ?? 'GET',
    url: req.url ?? '/',
    rawHeaders,
    body,
    time: performance.now(),
    rpcMethod:
      isObject(parsed) && typeof parsed['method'] === 'string' ? parsed['method'] : undefined,
    header: (name) => {
      const lower = name.toLowerCase()
      for (let i = 0; i < rawHeaders.length; i += 2) {
        if (rawHeaders[i]?.toLowerCase() === lower) return rawHeaders[i + 1]
      }
      return undefined
    },
    json: () => JSON.parse(body.toString('utf8')) as unknown,
  }
}

function parseJson(body: Buffer): unknown {
  try {
    return body.length === 0 ? undefined : (JSON.parse(body.toString('utf8')) as unknown)
  } catch {
    return undefined
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function sendRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }))
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
