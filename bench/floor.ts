/**
 * The floor: the barest pass-through a Node process can be. A `node:http` server collects the body
 * and hands it to undici `Pool.stream`, which writes the answer straight into Node's response. No
 * parsing, no checks, no logging: whatever the gateway costs above this is its own work, and the
 * bench reports gateway ÷ floor for every cell (README.md).
 *
 * Usage: node --import tsx bench/floor.ts --upstream http://127.0.0.1:N --port 0 [--connections N]
 *        [--lifeline]
 *   The request path is passed through, so /mcp and /mcp-nostore reach the same backend routes.
 *   --connections caps the undici Pool (default 256, above any concurrency `npm run bench` loads
 *   with). A long-lived answer (an SSE stream) holds its connection until it ends, so a run that
 *   holds N streams through the floor (streams.ts) needs N or more: the streams past the cap would
 *   wait in the pool's queue forever.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'

/** Request headers that end at this hop (RFC 9110 §7.6.1) or that undici sets itself. */
const SKIP: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'expect',
])

function main(): void {
  const { values } = parseArgs({
    options: {
      upstream: { type: 'string' },
      port: { type: 'string', default: '0' },
      connections: { type: 'string', default: '256' },
      lifeline: { type: 'boolean', default: false },
    },
  })
  if (values.upstream === undefined) throw new Error('--upstream is required')
  const connections = Number(values.connections)
  if (!Number.isInteger(connections) || connections < 1) {
    throw new Error(`--connections must be a positive integer, not ${values.connections}`)
  }
  const pool = new Pool(values.upstream, { connections, keepAliveTimeout: 120_000 })
  const server = createServer((req, res) => collect(req, res, pool))
  server.keepAliveTimeout = 120_000
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

function collect(req: IncomingMessage, res: ServerResponse, pool: Pool): void {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => {
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)
    const headers: string[] = []
    const raw = req.rawHeaders
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string
      if (!SKIP.has(name.toLowerCase())) headers.push(name, raw[i + 1] as string)
    }
    pool.stream(
      {
        path: req.url ?? '/',
        method: (req.method ?? 'POST') as 'POST',
        headers,
        body: req.method === 'GET' ? null : body,
        opaque: res,
      },
      ({ statusCode, headers: upstream, opaque }) => {
        const out = opaque as ServerResponse
        const relayed: Record<string, string | string[]> = {}
        for (const key in upstream) {
          if (key === 'connection' || key === 'keep-alive' || key === 'transfer-encoding') continue
          const value = upstream[key]
          if (value !== undefined) relayed[key] = value
        }
        out.writeHead(statusCode, relayed)
        return out
      },
      (err) => {
        if (err !== null && !res.headersSent) res.writeHead(502).end()
        else if (err !== null) res.destroy()
      },
    )
  })
}

main()
