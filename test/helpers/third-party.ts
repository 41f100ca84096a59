import { mkdtempSync, rmSync } from 'node:fs'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMCPClient } from '@ai-sdk/mcp'
import { MultiServerMCPClient } from '@langchain/mcp-adapters'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import {
  McpServer,
  completable,
  createMcpHandler,
  type ServerContext,
} from '@modelcontextprotocol/server'
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Server as V1Server } from '@modelcontextprotocol/sdk/server/index.js'
import { FastMCP } from 'fastmcp'
import {
  MCPPrompt,
  MCPResource,
  MCPServer,
  MCPTool,
  logger as frameworkLogger,
  type PromptProtocol,
  type ResourceContent,
  type ResourceProtocol,
  type ToolProtocol,
  type ToolResponse,
} from 'mcp-framework'
import * as z from 'zod'
import { serveMcpHandler } from '../../deploy/demo/serve.js'

/*
 * Third-party MCP servers and clients for the interoperability matrix
 * (test/integration/third-party-matrix.test.ts). Every member serves the same shape under its own
 * words: a tool `echo {text}`, a tool `count` that reports progress twice while it runs, a prompt
 * `greet {name}` whose argument completes from NAMES, and one static resource `<scheme>://info`.
 * The 2026-07-28 member declares `echo`'s `text` a parameter header (SEP-2243 `x-mcp-header`).
 */

/** What `greet`'s `name` argument completes from, on every member. */
const NAMES = ['ada', 'alan', 'grace'] as const

/** A member MCP server listening on 127.0.0.1. */
export interface Member {
  /** http://127.0.0.1:<port>/mcp */
  readonly url: string
  /** The URI of the member's one static resource. */
  readonly resourceUri: string
  close(): Promise<void>
}

const completeName = (value: string): string[] => NAMES.filter((n) => n.startsWith(value))

// ---------------------------------------------------------------------------------------------
// fastmcp 4.x (mcp-proxy underneath; the v1 SDK's Server, so 2025-era protocol only)

/** A fastmcp server on its own HTTP Stream transport (sessions, SSE answers). */
export async function startFastMcpMember(): Promise<Member> {
  const silent = { debug() {}, error() {}, info() {}, log() {}, warn() {} }
  const server = new FastMCP({ name: 'fastmcp-member', version: '1.0.0', logger: silent })
  server.addTool({
    name: 'echo',
    description: 'Echoes its text',
    parameters: z.object({ text: z.string() }),
    execute: ({ text }) => Promise.resolve(`fastmcp echo: ${text}`),
  })
  server.addTool({
    name: 'count',
    description: 'Counts to two, reporting progress',
    parameters: z.object({}),
    execute: async (_args, { reportProgress }) => {
      await reportProgress({ progress: 1, total: 2 })
      await reportProgress({ progress: 2, total: 2 })
      return 'fastmcp counted to 2'
    },
  })
  server.addPrompt({
    name: 'greet',
    description: 'Greets someone',
    arguments: [
      {
        name: 'name',
        description: 'Who to greet',
        required: true,
        complete: (value) => Promise.resolve({ values: completeName(value) }),
      },
    ],
    load: ({ name }) => Promise.resolve(`fastmcp says hello to ${name}`),
  })
  server.addResource({
    uri: 'fastmcp://info',
    name: 'info',
    mimeType: 'text/plain',
    load: () => Promise.resolve({ text: 'served by fastmcp' }),
  })
  // fastmcp's start() keeps the listening server to itself: find a free port, then bind it
  const port = await withFreePort((p) =>
    server.start({
      transportType: 'httpStream',
      httpStream: { port: p, host: '127.0.0.1', endpoint: '/mcp' },
    }),
  )
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    resourceUri: 'fastmcp://info',
    close: () => server.stop(),
  }
}

// ---------------------------------------------------------------------------------------------
// mcp-framework 0.2.x (its HttpStreamTransport: the v1 SDK transport, one session per client)

/*
 * mcp-framework validates arguments with its own zod 3 (nested under node_modules/mcp-framework),
 * whose `instanceof` checks reject this repository's zod 4 schemas. So `echo` and `greet`
 * implement the framework's ToolProtocol / PromptProtocol with plain JSON Schema, and `count`
 * extends MCPTool with an empty schema, which exercises the framework's own reportProgress.
 */

class FrameworkEcho implements ToolProtocol {
  [key: string]: unknown
  name = 'echo'
  description = 'Echoes its text'
  inputSchema = {
    type: 'object' as const,
    properties: { text: { type: 'string' } },
    required: ['text'],
  }
  get toolDefinition() {
    return { name: this.name, description: this.description, inputSchema: this.inputSchema }
  }
  toolCall(request: { params: { arguments?: Record<string, unknown> } }): Promise<ToolResponse> {
    const text = String(request.params.arguments?.['text'] ?? '')
    return Promise.resolve({ content: [{ type: 'text', text: `mcp-framework echo: ${text}` }] })
  }
  injectServer(_server: V1Server): void {}
  setProgressToken(): void {}
  setAbortSignal(): void {}
}

/**
 * How long `count` works after its last progress report. mcp-framework sends progress with
 * `server.notification()`, on the session's standalone GET stream rather than the request's
 * (spec 2025-11-25 basic/transports §Listening for Messages from the Server), so a client sees it
 * only if it arrives before the result on the POST stream. A tool that returned at once would
 * always lose that race (Node flushes the GET stream's write on the next tick and the POST's end
 * at once); one that works after reporting, as a real tool does, gives its progress the time.
 */
const FRAMEWORK_WORK_MS = 100

class FrameworkCount extends MCPTool {
  name = 'count'
  description = 'Counts to two, reporting progress'
  schema = {}
  protected override useStringify = false
  protected async execute(): Promise<unknown> {
    await this.reportProgress(1, 2)
    await this.reportProgress(2, 2)
    await new Promise((resolve) => setTimeout(resolve, FRAMEWORK_WORK_MS))
    return 'mcp-framework counted to 2'
  }
}

class FrameworkGreet extends MCPPrompt {
  name = 'greet'
  description = 'Greets someone'
  // read by promptDefinition only; getMessages below does not hand it to the framework's zod
  protected schema = {
    name: { type: undefined as never, description: 'Who to greet', required: true },
  }
  override getMessages(args: Record<string, unknown> = {}) {
    return this.generateMessages({ name: String(args['name'] ?? '') })
  }
  protected generateMessages({ name }: { name: string }) {
    const text = `mcp-framework says hello to ${name}`
    return Promise.resolve([{ role: 'user', content: { type: 'text', text } }])
  }
  override complete(argument: string, value: string) {
    return Promise.resolve({ values: argument === 'name' ? completeName(value) : [] })
  }
}

class FrameworkInfo extends MCPResource {
  uri = 'mcp-framework://info'
  name = 'info'
  override mimeType = 'text/plain'
  read(): Promise<ResourceContent[]> {
    return Promise.resolve([
      { uri: this.uri, mimeType: 'text/plain', text: 'served by mcp-framework' },
    ])
  }
}

/** An mcp-framework server on its http-stream transport (sessions, SSE answers). */
export async function startFrameworkMember(): Promise<Member> {
  quietFramework()
  // with no basePath it would scan <cwd>/dist, which is this repository's build
  const basePath = mkdtempSync(join(tmpdir(), 'mcp-framework-member-'))
  let server: MCPServer | undefined
  let stopped: Promise<void> | undefined
  const port = await withFreePort(async (p) => {
    const candidate = new MCPServer({
      name: 'mcp-framework-member',
      version: '1.0.0',
      basePath,
      transport: { type: 'http-stream', options: { port: p, host: '127.0.0.1', endpoint: '/mcp' } },
    })
    // the framework's own classes miss its interfaces under exactOptionalPropertyTypes only
    candidate.addTool(FrameworkEcho)
    candidate.addTool(FrameworkCount as unknown as new () => ToolProtocol)
    candidate.addPrompt(FrameworkGreet as unknown as new () => PromptProtocol)
    candidate.addResource(FrameworkInfo as unknown as new () => ResourceProtocol)
    // start() resolves only once the server stops; it rejects when the port cannot be bound
    const running = candidate.start()
    await Promise.race([running, waitForHealth(p)])
    server = candidate
    stopped = running.catch(() => {})
  })
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    resourceUri: 'mcp-framework://info',
    async close() {
      await server?.stop()
      await stopped
      rmSync(basePath, { recursive: true, force: true })
    },
  }
}

let quieted = false
/** mcp-framework logs every session to stderr through a process-wide logger. */
function quietFramework(): void {
  if (quieted) return
  quieted = true
  const off = (): void => {}
  Object.assign(frameworkLogger, { info: off, warn: off, debug: off, error: off, log: off })
}

async function waitForHealth(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/health`)
      if (res.ok) return
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`mcp-framework did not listen on ${port}`)
}

// ---------------------------------------------------------------------------------------------
// The official SDK v2 (2026-07-28, with 2025-era requests served stateless)

/** A v2 `@modelcontextprotocol/server` McpServer behind `@modelcontextprotocol/node`. */
export async function startSdkMember(): Promise<Member> {
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'sdk-member', version: '1.0.0' })
    server.registerTool(
      'echo',
      {
        description: 'Echoes its text',
        // SEP-2243: a 2026-07-28 call mirrors `text` into Mcp-Param-Text, or the server refuses it
        inputSchema: z.object({ text: z.string().meta({ 'x-mcp-header': 'Text' }) }),
      },
      ({ text }) => ({ content: [{ type: 'text', text: `sdk echo: ${text}` }] }),
    )
    server.registerTool(
      'count',
      { description: 'Counts to two, reporting progress' },
      async (ctx: ServerContext) => {
        const token = ctx.mcpReq._meta?.progressToken
        for (const progress of [1, 2]) {
          if (token !== undefined)
            await ctx.mcpReq.notify({
              method: 'notifications/progress',
              params: { progressToken: token, progress, total: 2 },
            })
        }
        return { content: [{ type: 'text', text: 'sdk counted to 2' }] }
      },
    )
    server.registerPrompt(
      'greet',
      {
        description: 'Greets someone',
        argsSchema: z.object({ name: completable(z.string(), completeName) }),
      },
      ({ name }) => ({
        messages: [{ role: 'user', content: { type: 'text', text: `sdk says hello to ${name}` } }],
      }),
    )
    server.registerResource('info', 'sdk://info', { mimeType: 'text/plain' }, (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'served by sdk' }],
    }))
    return server
  })
  const http = await serveMcpHandler(handler)
  return { url: http.url, resourceUri: 'sdk://info', close: () => http.close() }
}

/** Binds a free port for `start`, retrying when another process took it in between. */
async function withFreePort(start: (port: number) => Promise<unknown>): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    try {
      await start(port)
      return port
    } catch (error) {
      if (attempt >= 4 || (error as { code?: string }).code !== 'EADDRINUSE') throw error
    }
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo
      probe.close(() => resolve(port))
    })
  })
}

// ---------------------------------------------------------------------------------------------
// Clients, each behind one interface: only what the matrix compares, never ids or _meta

/** A content block, prompt message or resource content, with every `_meta` dropped. */
type Plain = Record<string, unknown>

/** What a tool call gave: its content blocks and the progress notifications seen. */
interface CallOutcome {
  readonly content: readonly Plain[]
  readonly isError: boolean
  readonly progress: readonly number[]
}

/** One client connected to one endpoint. */
export interface MatrixClient {
  /** The protocol version the client ended up speaking, where it tells. */
  readonly protocolVersion: string | undefined
  listTools(): Promise<string[]>
  listPrompts(): Promise<string[]>
  listResources(): Promise<string[]>
  callTool(name: string, args: Record<string, unknown>): Promise<CallOutcome>
  getPrompt(name: string, args: Record<string, string>): Promise<readonly Plain[]>
  readResource(uri: string): Promise<readonly Plain[]>
  /** The values completing argument `arg` of prompt `prompt` from `value`. */
  complete(prompt: string, arg: string, value: string): Promise<string[]>
  close(): Promise<void>
}

/** How long one request may take before the client gives up (a hang fails its cell quickly). */
const REQUEST_MS = 8_000
const opts = { timeout: REQUEST_MS }

/** The clients of the matrix. */
export const CLIENTS = ['v2-auto', 'v2-2025', 'v1', 'ai-sdk', 'langchain'] as const
export type ClientName = (typeof CLIENTS)[number]

/** Connects client `name` to `url`. */
export function connectMatrixClient(name: ClientName, url: string): Promise<MatrixClient> {
  switch (name) {
    case 'v2-auto':
      return connectV2(url, true)
    case 'v2-2025':
      return connectV2(url, false)
    case 'v1':
      return connectV1(url)
    case 'ai-sdk':
      return connectAiSdk(url)
    case 'langchain':
      return connectLangChain(url)
  }
}

/** Drops `_meta` (anywhere) so results compare on meaning. */
function plain<T>(value: T): T {
  if (Array.isArray(value)) return value.map(plain) as T
  if (typeof value !== 'object' || value === null) return value
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(value)) if (key !== '_meta') out[key] = plain(v)
  return out as T
}

type ToolResultLike = { content?: unknown; isError?: unknown }

function outcome(result: ToolResultLike, progress: number[]): CallOutcome {
  const content = Array.isArray(result.content) ? (plain(result.content) as Plain[]) : []
  return { content, isError: result.isError === true, progress }
}

async function connectV2(url: string, auto: boolean): Promise<MatrixClient> {
  const client = new Client(
    { name: auto ? 'matrix-v2-auto' : 'matrix-v2-2025', version: '1.0.0' },
    auto ? { versionNegotiation: { mode: 'auto' } } : {},
  )
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  const protocolVersion = client.getNegotiatedProtocolVersion()
  return {
    protocolVersion,
    listTools: async () => (await client.listTools(undefined, opts)).tools.map((t) => t.name),
    listPrompts: async () => (await client.listPrompts(undefined, opts)).prompts.map((p) => p.name),
    listResources: async () =>
      (await client.listResources(undefined, opts)).resources.map((r) => r.uri),
    async callTool(name, args) {
      const progress: number[] = []
      const result = await client.callTool(
        { name, arguments: args },
        { ...opts, onprogress: (p) => void progress.push(p.progress) },
      )
      return outcome(result, progress)
    },
    getPrompt: async (name, args) =>
      plain((await client.getPrompt({ name, arguments: args }, opts)).messages) as Plain[],
    readResource: async (uri) =>
      plain((await client.readResource({ uri }, opts)).contents) as Plain[],
    complete: async (prompt, arg, value) =>
      (
        await client.complete(
          { ref: { type: 'ref/prompt', name: prompt }, argument: { name: arg, value } },
          opts,
        )
      ).completion.values,
    close: () => client.close(),
  }
}

async function connectV1(url: string): Promise<MatrixClient> {
  const client = new V1Client({ name: 'matrix-v1', version: '1.0.0' })
  const transport = new V1Transport(new URL(url))
  await client.connect(transport)
  return {
    protocolVersion: transport.protocolVersion,
    listTools: async () => (await client.listTools(undefined, opts)).tools.map((t) => t.name),
    listPrompts: async () => (await client.listPrompts(undefined, opts)).prompts.map((p) => p.name),
    listResources: async () =>
      (await client.listResources(undefined, opts)).resources.map((r) => r.uri),
    async callTool(name, args) {
      const progress: number[] = []
      const result = await client.callTool({ name, arguments: args }, undefined, {
        ...opts,
        onprogress: (p) => void progress.push(p.progress),
      })
      return outcome(result as ToolResultLike, progress)
    },
    getPrompt: async (name, args) =>
      plain((await client.getPrompt({ name, arguments: args }, opts)).messages) as Plain[],
    readResource: async (uri) =>
      plain((await client.readResource({ uri }, opts)).contents) as Plain[],
    complete: async (prompt, arg, value) =>
      (
        await client.complete(
          { ref: { type: 'ref/prompt', name: prompt }, argument: { name: arg, value } },
          opts,
        )
      ).completion.values,
    close: () => client.close(),
  }
}

/** Vercel's AI SDK MCP client: its own implementation, no onprogress in its request options. */
async function connectAiSdk(url: string): Promise<MatrixClient> {
  const client = await createMCPClient({
    transport: { type: 'http', url },
    clientName: 'matrix-ai-sdk',
  })
  return {
    protocolVersion: client.initializeResult.protocolVersion,
    listTools: async () => (await client.listTools({ options: opts })).tools.map((t) => t.name),
    listPrompts: async () =>
      (await client.listPrompts({ options: opts })).prompts.map((p) => p.name),
    listResources: async () =>
      (await client.listResources({ options: opts })).resources.map((r) => r.uri),
    callTool: async (name, args) =>
      outcome(
        (await client.callTool({ name, arguments: args, options: opts })) as ToolResultLike,
        [],
      ),
    getPrompt: async (name, args) =>
      plain((await client.getPrompt({ name, arguments: args, options: opts })).messages) as Plain[],
    readResource: async (uri) =>
      plain((await client.readResource({ uri, options: opts })).contents) as Plain[],
    complete: async (prompt, arg, value) =>
      (
        await client.complete({
          ref: { type: 'ref/prompt', name: prompt },
          argument: { name: arg, value },
          options: opts,
        })
      ).completion.values,
    close: () => client.close(),
  }
}

/**
 * LangChain's MultiServerMCPClient over one server: tools as LangChain tools, invoked with a
 * ToolCall so the answer is the ToolMessage an agent would be given (its content, artifacts
 * apart); resources through the client's own API; prompts and completion through the v1 Client
 * it exposes (it has no API of its own for them).
 */
async function connectLangChain(url: string): Promise<MatrixClient> {
  const progress: number[] = []
  const multi = new MultiServerMCPClient({
    mcpServers: { member: { url, transport: 'http', automaticSSEFallback: false } },
    onProgress: (p) => void progress.push(p.progress),
    useStandardContentBlocks: false,
  })
  const raw = await multi.getClient('member')
  if (raw === undefined) throw new Error('langchain: no client for member')
  const tools = async () => multi.getTools('member')
  const transport = raw.transport as { protocolVersion?: string } | undefined
  return {
    protocolVersion: transport?.protocolVersion,
    listTools: async () => (await tools()).map((t) => t.name),
    listPrompts: async () => (await raw.listPrompts(undefined, opts)).prompts.map((p) => p.name),
    listResources: async () =>
      ((await multi.listResources('member'))['member'] ?? []).map((r) => r.uri),
    async callTool(name, args) {
      progress.length = 0
      const tool = (await tools()).find((t) => t.name === name)
      if (tool === undefined) throw new Error(`langchain: no tool ${name}`)
      const call = { type: 'tool_call' as const, id: 'call-1', name, args }
      const message = (await tool.invoke(call, opts)) as { content: unknown; status?: string }
      const content =
        typeof message.content === 'string'
          ? [{ type: 'text', text: message.content }]
          : (plain(message.content) as Plain[])
      return { content, isError: message.status === 'error', progress: [...progress] }
    },
    getPrompt: async (name, args) =>
      plain((await raw.getPrompt({ name, arguments: args }, opts)).messages) as Plain[],
    readResource: async (uri) => plain(await multi.readResource('member', uri)) as Plain[],
    complete: async (prompt, arg, value) =>
      (
        await raw.complete(
          { ref: { type: 'ref/prompt', name: prompt }, argument: { name: arg, value } },
          opts,
        )
      ).completion.values,
    close: () => multi.close(),
  }
}
