/**
 * The backend of `npm run bench:scale` (scale.ts): bench/backend.ts's canned `tools/call` answer
 * at `/mcp`, and at `/m/<i>` a member with its own tools (`m<i>_tool_<j>`, 50 by default, or
 * `?tools=N`), listed uncacheable so that every merged `tools/list` reaches every member.
 *
 * Usage: node --import tsx bench/scale-backend.ts --port 0 [--lifeline]
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { parseArgs } from 'node:util'
import { CALL_RESULT_TAIL, errorBody, withId } from './fixtures.js'

const MAX_BODY_BYTES = 64 * 1024
const DEFAULT_TOOLS = 50

/** List tails by member and tool count, built once each. */
const lists = new Map<string, string>()

function listTail(member: string, count: number): string {
  const key = `${member}/${count}`
  let tail = lists.get(key)
  if (tail === undefined) {
    const tools = Array.from({ length: count }, (_, j) => ({
      name: `m${member}_tool_${String(j).padStart(4, '0')}`,
      description: `Synthetic tool ${j} of member ${member}, padding the list to a realistic size.`,
      inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
    }))
    tail = `,"result":${JSON.stringify({ tools, resultType: 'complete', ttlMs: 0, cacheScope: 'private' })}}`
    lists.set(key, tail)
  }
  return tail
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://backend')
  if (req.method === 'GET' && url.pathname === '/healthz') return send(res, 200, '{"ok":true}')
  const member = /^\/m\/(\d+)$/.exec(url.pathname)?.[1]
  if (url.pathname !== '/mcp' && member === undefined)
    return send(res, 404, errorBody(null, -32601, 'Not found'))
  if (req.method !== 'POST') return send(res, 405, errorBody(null, -32600, 'POST only'))
  const count = Number(url.searchParams.get('tools') ?? DEFAULT_TOOLS)
  readBody(req, res, (body) => {
    let msg: { id?: unknown; method?: unknown }
    try {
      msg = JSON.parse(body) as { id?: unknown; method?: unknown }
    } catch {
      return send(res, 400, errorBody(null, -32700, 'Parse error'))
    }
    if (msg.method === 'tools/call') return send(res, 200, withId(msg.id, CALL_RESULT_TAIL))
    if (msg.method === 'tools/list')
      return send(res, 200, withId(msg.id, listTail(member ?? 'x', count)), true)
    if (msg.id === undefined) return void res.writeHead(202).end()
    return send(res, 200, errorBody(msg.id, -32601, 'Method not found'))
  })
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
  if (noStore) headers['cache-control'] = 'no-store'
  res.writeHead(status, headers).end(body)
}

function main(): void {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      lifeline: { type: 'boolean', default: false },
    },
  })
  const server = createServer(handle)
  server.keepAliveTimeout = 120_000
  server.headersTimeout = 121_000
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
