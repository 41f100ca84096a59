import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { createServer as createNetServer } from 'node:net'
import {
  createMcpHandler,
  ProtocolError,
  ProtocolErrorCode,
  Server,
} from '@modelcontextprotocol/server'
import { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport as V1Transport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js'
import { FastMCP } from 'fastmcp'
import * as z from 'zod'
import { httpUrl, listen, nodeServing } from '../../deploy/demo/serve.js'

/**
 * Members for test/integration/virtual-regressions.test.ts, each built with the framework the
 * failure was reported with: fastmcp 4.x (2025-era only, SSE answers primed with an empty event),
 * the official SDK's low-level `Server` (its own tools/list pages), and a 2025-era SDK v1 server
 * that may declare `logging` (as fastmcp does: what makes inspector-cli send `logging/setLevel`)
 * or be slow to open a session.
 */

/** One JSON-RPC message as a member received it. */
interface SeenMessage {
  readonly method: string | undefined
  readonly params: Record<string, unknown> | undefined
  readonly headers: IncomingHttpHeaders
}

/** A member that records what reached it. */
export interface RecordingMember {
  /** http://127.0.0.1:<port>/mcp */
  readonly url: string
  /** Every JSON-RPC message that reached it, oldest first. */
  readonly seen: SeenMessage[]
  close(): Promise<void>
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

function parsed(body: Buffer): unknown {
  try {
    return body.length === 0 ? undefined : (JSON.parse(body.toString('utf8')) as unknown)
  } catch {
    return undefined
  }
}

function record(seen: SeenMessage[], req: IncomingMessage, body: unknown): void {
  const m = (typeof body === 'object' && body !== null ? body : {}) as {
    method?: string
    params?: Record<string, unknown>
  }
  seen.push({ method: m.method, params: m.params, headers: req.headers })
}

/**
 * A 2026-07-28 member on the official SDK's low-level `Server`, serving `tools` in tools/list
 * pages of `pageSize` (the cursor is the offset); each tool answers `ran <name>`. With
 * `pageDelayMs`, each page is answered that long after it was asked for (a slow member).
 */
export async function startPagedMember(
  tools: readonly string[],
  pageSize: number,
  options: { readonly pageDelayMs?: number } = {},
): Promise<RecordingMember> {
  const handler = createMcpHandler(() => {
    const server = new Server({ name: 'paged', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.setRequestHandler('tools/list', async (request) => {
      const delay = options.pageDelayMs ?? 0
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay))
      const cursor = request.params?.cursor
      const start = cursor === undefined ? 0 : Number(cursor)
      if (!Number.isInteger(start) || start < 0 || start > tools.length)
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid cursor: ${cursor}`)
      const end = start + pageSize
      return {
        tools: tools
          .slice(start, end)
          .map((name) => ({ name, inputSchema: { type: 'object' as const } })),
        ...(end < tools.length && { nextCursor: String(end) }),
      }
    })
    server.setRequestHandler('tools/call', (request) => {
      const name = request.params.name
      if (!tools.includes(name))
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}`)
      return { content: [{ type: 'text' as const, text: `ran ${name}` }] }
    })
    return server
  })
  const node = nodeServing(handler)
  const seen: SeenMessage[] = []
  const http = await listen((req, res) => {
    void readBody(req).then((body) => {
      record(seen, req, parsed(body))
      return node(req, res, body)
    })
  })
  return {
    url: httpUrl(http.host, http.port),
    seen,
    async close() {
      await handler.close()
      await http.close()
    },
  }
}

/** Options of {@link startV1Member}. */
interface V1MemberOptions {
  /** Declare the `logging` capability (the SDK then answers `logging/setLevel`), as fastmcp does. */
  readonly logging?: boolean
  /** Each `initialize` is held until this settles (a member slow to open a session). */
  readonly holdInitialize?: Promise<void>
}

/** A 2025-era SDK v1 member, and how many `initialize` requests it has answered. */
export interface V1Member extends RecordingMember {
  readonly answeredInitializes: number
}

/**
 * A 2025-era member on the SDK v1 `McpServer` (sessions, as the v1 SDK serves them) with one
 * tool, `echo`, and one prompt, `hello`.
 */
export async function startV1Member(options: V1MemberOptions = {}): Promise<V1Member> {
  const sessions = new Map<string, V1Transport>()
  const servers: V1McpServer[] = []
  const seen: SeenMessage[] = []
  let answered = 0
  const http = await listen((req, res) => {
    void (async () => {
      const body = parsed(await readBody(req))
      record(seen, req, body)
      const id = req.headers['mcp-session-id']
      const known = typeof id === 'string' ? sessions.get(id) : undefined
      if (known !== undefined) return known.handleRequest(req, res, body)
      if (req.method !== 'POST' || !isInitializeRequest(body)) {
        res.writeHead(typeof id === 'string' ? 404 : 400, { 'content-type': 'application/json' })
        return void res.end(
          '{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"No valid session"}}',
        )
      }
      await options.holdInitialize
      const server = new V1McpServer(
        { name: 'v1-member', version: '1.0.0' },
        { capabilities: options.logging === true ? { logging: {} } : {} },
      )
      servers.push(server)
      server.registerTool('echo', { inputSchema: { text: z.string() } }, ({ text }) => ({
        content: [{ type: 'text', text }],
      }))
      server.registerPrompt('hello', { description: 'Says hello' }, () => ({
        messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }],
      }))
      const transport: V1Transport = new V1Transport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void sessions.set(sid, transport),
      })
      await server.connect(transport)
      await transport.handleRequest(req, res, body)
      answered++
    })()
  })
  return {
    url: httpUrl(http.host, http.port),
    seen,
    get answeredInitializes() {
      return answered
    },
    async close() {
      await Promise.all(servers.map((s) => s.close()))
      await http.close()
    },
  }
}

/** A fastmcp server and the tool calls it ran. */
export interface FastMcpMember {
  readonly url: string
  /** Arguments of each `add` call, in order. */
  readonly calls: { readonly a: number; readonly b: number }[]
  /** Lets a running `add` return (it reports progress, then waits for this, or 3 s). */
  release(): void
  close(): Promise<void>
}

const QUIET = { debug() {}, error() {}, info() {}, log() {}, warn() {} }

/**
 * A fastmcp 4.x server (its default, stateful httpStream transport) with a tool `add` that
 * reports progress 1/2, then waits for `release()` (or 3 s, after which it says so in its
 * answer), and a prompt `greet`. fastmcp cannot say which port it got from port 0, so a free port
 * is picked first (and picked again if another process took it meanwhile).
 */
export async function startFastMcpMember(): Promise<FastMcpMember> {
  const calls: { a: number; b: number }[] = []
  const waiting = new Set<() => void>()
  const server = new FastMCP({ name: 'fastmcp-member', version: '1.0.0', logger: QUIET })
  server.addTool({
    name: 'add',
    description: 'Adds two numbers, reporting progress first',
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }, ctx) => {
      calls.push({ a, b })
      await ctx.reportProgress({ progress: 1, total: 2 })
      const released = await new Promise<boolean>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer)
          waiting.delete(wake)
          resolve(true)
        }
        const timer = setTimeout(() => {
          waiting.delete(wake)
          resolve(false)
        }, 3_000)
        waiting.add(wake)
      })
      return released ? String(a + b) : `${a + b} (progress never reached the client)`
    },
  })
  server.addPrompt({
    name: 'greet',
    description: 'Says hello',
    load: () => Promise.resolve('hello'),
  })
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    try {
      await server.start({
        transportType: 'httpStream',
        httpStream: { port, host: '127.0.0.1', endpoint: '/mcp' },
      })
      return {
        url: `http://127.0.0.1:${port}/mcp`,
        calls,
        release: () => {
          for (const wake of [...waiting]) wake()
        },
        close: () => server.stop(),
      }
    } catch (err) {
      if (attempt >= 2 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err
    }
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createNetServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}
