/**
 * A minimal, SDK-free MCP backend for the bench: node:http, keep-alive, canned answers with the
 * request id echoed. It stands for the cheapest possible upstream, so whatever the gateway adds is
 * visible next to it.
 *
 * Usage: node --import tsx bench/backend.ts --port N [--lifeline]
 *   --port 0     picks a free port; the chosen port is printed as `listening <port>`
 *   --lifeline   exit when stdin closes (the bench runner holds it open), so no orphan survives
 *   --keep-alive-ms N   idle keep-alive of the backend's connections (default 120000)
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { parseArgs } from 'node:util'
import {
  CALL_RESULT_TAIL,
  INITIALIZE_TAIL,
  LIST_NO_STORE_TAIL,
  LIST_RESULT_TAIL,
  errorBody,
  withId,
} from './fixtures.js'

const MAX_BODY_BYTES = 64 * 1024

/** The MCP endpoints: `/mcp` answers cacheable lists, `/mcp-nostore` uncacheable ones. */
const LIST_TAILS: Readonly<Record<string, string>> = {
  '/mcp': LIST_RESULT_TAIL,
  '/mcp-nostore': LIST_NO_STORE_TAIL,
}

let requests = 0
/** Open subscriptions/listen streams and open sockets, for the streams bench (streams.ts). */
let streams = 0
let sockets = 0

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '/'
  if (req.method === 'GET' && path === '/__stats')
    return send(res, 200, `{"requests":${requests},"streams":${streams},"sockets":${sockets}}`)
  if (req.method === 'GET' && path === '/healthz') return send(res, 200, '{"ok":true}')
  const listTail = LIST_TAILS[path]
  if (listTail === undefined) return send(res, 404, errorBody(null, -32601, 'Not found'))
  if (req.method !== 'POST') return send(res, 405, errorBody(null, -32600, 'POST only'))
  requests++
  readBody(req, res, (body) => answer(res, body, listTail))
}

function answer(res: ServerResponse, body: string, listTail: string): void {
  let msg: { id?: unknown; method?: unknown }
  try {
    msg = JSON.parse(body) as { id?: unknown; method?: unknown }
  } catch {
    return send(res, 400, errorBody(null, -32700, 'Parse error'))
  }
  switch (msg.method) {
    case 'tools/call':
      return send(res, 200, withId(msg.id, CALL_RESULT_TAIL))
    case 'tools/list':
      return send(res, 200, withId(msg.id, listTail), listTail === LIST_NO_STORE_TAIL)
    case 'initialize':
      return send(res, 200, withId(msg.id, INITIALIZE_TAIL))
    case 'subscriptions/listen':
      return listen(res, msg.id)
    default:
      // Notifications have no id and expect 202 Accepted with no body (streamable HTTP).
      if (msg.id === undefined) return void res.writeHead(202).end()
      return send(res, 200, errorBody(msg.id, -32601, 'Method not found'))
  }
}

function readBody(req: IncomingMessage, res: ServerResponse, done: (body: string) => void): void {
  const chunks: Buffer[] = []
  let size = 0
  req.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size > MAX_BODY_BYTES) {
      send(res, 413, errorBody(null, -32600, 'Body too large'))
      req.destroy()
      return
    }
    chunks.push(chunk)
  })
  req.on('end', () => {
    if (size <= MAX_BODY_BYTES) done(Buffer.concat(chunks, size).toString('utf8'))
  })
}

function send(res: ServerResponse, status: number, body: string, noStore = false): void {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  }
  // RFC 9111 §5.2.2.5: the HTTP-level twin of cacheScope 'private' / ttlMs 0.
  if (noStore) headers['cache-control'] = 'no-store'
  res.writeHead(status, headers).end(body)
}

/**
 * An idle listen stream, as an SDK server holds one: the acknowledgement event, then nothing until
 * the client goes away (spec 2026-07-28 subscriptions/listen).
 */
function listen(res: ServerResponse, id: unknown): void {
  streams++
  res.on('close', () => streams--)
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  const ack = {
    jsonrpc: '2.0',
    method: 'notifications/subscriptions/acknowledged',
    params: {
      notifications: { toolsListChanged: true },
      _meta: { 'io.modelcontextprotocol/subscriptionId': id },
    },
  }
  res.write(`event: message\ndata: ${JSON.stringify(ack)}\n\n`)
}

function main(): void {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      lifeline: { type: 'boolean', default: false },
      'keep-alive-ms': { type: 'string', default: '120000' },
    },
  })
  const server = createServer(handle)
  server.on('connection', (socket) => {
    sockets++
    socket.on('close', () => sockets--)
  })
  // Longer than any pause between bench cells, so the gateway's upstream pool is not torn down and
  // re-dialled mid-run (Node's default is 5 s).
  // (streams.ts passes a short one, so the idle connections a closed stream leaves go quickly.)
  server.keepAliveTimeout = Number(values['keep-alive-ms'])
  server.headersTimeout = server.keepAliveTimeout + 1000
  server.listen(Number(values.port), '127.0.0.1', () => {
    const address = server.address()
    const port = typeof address === 'object' && address !== null ? address.port : values.port
    process.stdout.write(`listening ${port}\n`)
  })
  if (values.lifeline) {
    process.stdin.on('close', () => process.exit(0))
    process.stdin.resume()
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0))
}

main()
