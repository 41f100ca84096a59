import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import { toNodeHandler, type NodeIncomingMessageLike } from '@modelcontextprotocol/node'
import {
  DEFAULT_MAX_REQUEST_BODY_SIZE,
  type McpHttpHandler,
  type McpServerOptions,
} from '@modelcontextprotocol/server'

/** Per-method `ttlMs` / `cacheScope` defaults for an McpServer's cacheable results. */
export type CacheHints = NonNullable<McpServerOptions['cacheHints']>

/** Where to listen; port 0 (the default) lets the OS pick a free port. */
export interface ListenOptions {
  readonly port?: number
  readonly host?: string
}

/** A node:http server that is already listening. */
export interface ListeningServer {
  readonly server: Server
  readonly host: string
  readonly port: number
  /** Stops listening and destroys every open socket, including idle keep-alive and SSE ones. */
  close(): Promise<void>
}

/** An MCP endpoint served over node:http at `url` (…/mcp). */
export interface McpHttpServer {
  readonly url: string
  readonly port: number
  readonly handler: McpHttpHandler
  /**
   * Stops listening for `ms` (every open connection dropped, as when a process dies), then
   * listens again on the same port: a replica going away and coming back.
   */
  pause(ms: number): Promise<void>
  /** Ends open listen streams gracefully, then closes the HTTP server and all its sockets. */
  close(): Promise<void>
}

/**
 * A route besides /mcp (the demo's control routes, deploy/demo/control.ts): answers and returns
 * true, or returns false to leave the request to the 404.
 */
export type ExtraRoute = (req: IncomingMessage, res: ServerResponse) => boolean

/** The path every demo server serves MCP on. */
export const MCP_PATH = '/mcp'

/** Starts `listener` and resolves once the socket is bound (no free-port-then-listen race). */
export async function listen(
  listener: RequestListener,
  { port = 0, host = '127.0.0.1' }: ListenOptions = {},
): Promise<ListeningServer> {
  const server = createServer(listener)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const bound = (server.address() as AddressInfo).port
  let closing: Promise<void> | undefined
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve())
      // close() alone waits for keep-alive and SSE sockets to end by themselves
      server.closeAllConnections()
    })
    return closing
  }
  return { server, host, port: bound, close }
}

/** Builds `http://host:port/path`, bracketing IPv6 literals. */
export function httpUrl(host: string, port: number, path = MCP_PATH): string {
  const h = host.includes(':') ? `[${host}]` : host
  return `http://${h}:${port}${path}`
}

/**
 * Serves `handler` at /mcp on node:http (any method; the SDK answers 405 itself), `extra` routes
 * (if any) on other paths, else 404.
 */
export async function serveMcpHandler(
  handler: McpHttpHandler,
  options: ListenOptions = {},
  extra?: ExtraRoute,
): Promise<McpHttpServer> {
  const node = nodeServing(handler)
  const listener: RequestListener = (req, res) => {
    if (pathOf(req.url) !== MCP_PATH) {
      if (extra?.(req, res) !== true)
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found')
      return
    }
    void node(req, res)
  }
  let listening = await listen(listener, options)
  const { host, port } = listening
  let back: NodeJS.Timeout | undefined
  let closed = false
  return {
    url: httpUrl(host, port),
    port,
    handler,
    async pause(ms) {
      if (back !== undefined) return
      await listening.close()
      back = setTimeout(() => {
        if (closed) return
        listen(listener, { port, host }).then(
          (l) => {
            listening = l
            back = undefined
            if (closed) void l.close() // closed while it was coming back
          },
          (err: unknown) => console.error(`demo server on port ${port} could not come back:`, err),
        )
      }, ms)
    },
    async close() {
      closed = true
      clearTimeout(back)
      // handler.close() writes the final frame on open listen streams before the sockets go
      await handler.close()
      await listening.close()
    },
  }
}

/** The path part of a request target, without the query string. */
export function pathOf(url: string | undefined): string {
  const target = url ?? '/'
  const q = target.indexOf('?')
  return q === -1 ? target : target.slice(0, q)
}

/** Serves one exchange: the body, when given, is read instead of the (already consumed) socket. */
export type NodeServing = (
  req: IncomingMessage,
  res: ServerResponse,
  body?: Buffer,
) => Promise<void>

/**
 * Serves `handler` on node:http as the SDK's toNodeHandler does, so that a 2025-era client that
 * goes away cancels its call whenever the garbage collector has run.
 *
 * toNodeHandler aborts the signal of the `Request` it builds when the response closes, and the SDK
 * cancels the running call on that signal. Not given a parsed body, the SDK clones the `Request`
 * to read it, and its 2025-era path listens to the clone's signal; but in Node's `fetch` (undici)
 * a clone's signal stops following its original's at the first collection. So the body (read here
 * unless the caller already has) is handed over parsed and nothing is cloned: the bytes the SDK
 * would have parsed, read no further than its size limit. Whatever JSON.parse refuses goes the
 * SDK's own way, and the SDK answers it as it would.
 */
export function nodeServing(handler: Pick<McpHttpHandler, 'fetch'>): NodeServing {
  const node = toNodeHandler(handler)
  return async (req, res, given) => {
    let body = given
    if (body === undefined && req.method === 'POST') {
      try {
        body = await readUpTo(req, BODY_LIMIT + 1)
      } catch {
        res.destroy() // the client went away while sending
        return
      }
    }
    return node(toNodeRequest(req, body), res, parsedOrUndefined(req, body))
  }
}

const BODY_LIMIT = DEFAULT_MAX_REQUEST_BODY_SIZE

/**
 * The request body, or its first `limit` bytes: past the SDK's limit it answers 413 on its own,
 * and the rest is left unread (paused, not destroyed, so that the answer can still be written).
 */
function readUpTo(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let length = 0
    const done = (): void => {
      req.off('data', onData).off('end', done).off('error', reject).off('close', gone)
      resolve(Buffer.concat(chunks, length).subarray(0, limit))
    }
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk)
      length += chunk.length
      if (length < limit) return
      req.pause()
      done()
    }
    // A client that goes away mid-body ends the request without 'end' (or 'error').
    const gone = (): void => reject(new Error('the request ended before its body'))
    req.on('data', onData).once('end', done).once('error', reject).once('close', gone)
  })
}

/** The body as the SDK would parse it, or undefined where it should read and judge it itself. */
function parsedOrUndefined(req: IncomingMessage, body: Buffer | undefined): unknown {
  if (body === undefined || req.method !== 'POST' || body.length > BODY_LIMIT) return undefined
  try {
    return JSON.parse(body.toString('utf8'))
  } catch {
    return undefined
  }
}

/** The request shape toNodeHandler takes, reading `body` when given instead of the socket. */
function toNodeRequest(req: IncomingMessage, body?: Buffer): NodeIncomingMessageLike {
  // IncomingMessage itself fails exactOptionalPropertyTypes (method: string | undefined)
  return {
    method: req.method ?? 'GET',
    url: req.url ?? '/',
    headers: req.headers,
    [Symbol.asyncIterator]:
      body === undefined ? () => req[Symbol.asyncIterator]() : () => yieldOnce(body),
  }
}

async function* yieldOnce(chunk: Buffer): AsyncGenerator<Buffer> {
  yield chunk
}
