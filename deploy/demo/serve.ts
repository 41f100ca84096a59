import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import { toNodeHandler, type NodeIncomingMessageLike } from '@modelcontextprotocol/node'
import type { McpHttpHandler, McpServerOptions } from '@modelcontextprotocol/server'

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
  const node = toNodeHandler(handler)
  const listener: RequestListener = (req, res) => {
    if (pathOf(req.url) !== MCP_PATH) {
      if (extra?.(req, res) !== true)
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found')
      return
    }
    void node(toNodeRequest(req), res)
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

/**
 * The request shape toNodeHandler takes. With `body`, the handler reads those bytes instead of the
 * (already consumed) socket stream, so a caller can look at the body first.
 */
export function toNodeRequest(req: IncomingMessage, body?: Buffer): NodeIncomingMessageLike {
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
