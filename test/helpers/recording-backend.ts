import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { parseJson } from './readers.js'

/** One request exactly as it reached the backend. */
export interface ReceivedRequest {
  readonly method: string
  /** The request target (path and query). */
  readonly url: string
  /** [name, value, name, value, …] in wire order and case. */
  readonly rawHeaders: readonly string[]
  /** The body bytes as received, untouched. */
  readonly body: Buffer
}

/** A backend that records everything and validates nothing. */
export interface RecordingBackend {
  /** http://127.0.0.1:<port> */
  readonly origin: string
  /** Every request received, oldest first (a live array). */
  readonly requests: ReceivedRequest[]
  close(): Promise<void>
}

// A result every gateway feature accepts whatever the method: the list keys filters look for,
// `content` for calls, `resultType` for 2026-07-28 clients.
const RESULT =
  '{"resultType":"complete","content":[],"tools":[],"prompts":[],"resources":[],' +
  '"resourceTemplates":[],"contents":[],"messages":[],"completion":{"values":[]}}'

/**
 * Starts a plain node:http backend on 127.0.0.1:0 that records the raw headers and body bytes of
 * every request and answers a fixed JSON-RPC result carrying the request's id as written (big
 * integers included); a body without a top-level `id` gets 202. It never checks anything, so what
 * it records is exactly what the gateway let through.
 */
export async function startRecordingBackend(): Promise<RecordingBackend> {
  const requests: ReceivedRequest[] = []
  const sockets = new Set<Socket>()
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        rawHeaders: req.rawHeaders,
        body,
      })
      const id = rawId(body)
      if (id === undefined) return void res.writeHead(202).end()
      const text = `{"jsonrpc":"2.0","id":${id},"result":${RESULT}}`
      res.writeHead(200, { 'content-type': 'application/json' }).end(text)
    })
  })
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** The raw text of the last top-level `id` (what JSON.parse would use), "null" when unreadable. */
function rawId(body: Buffer): string | undefined {
  try {
    const root = parseJson(body.toString('utf8'))
    if (root.t !== 'obj') return 'null'
    const id = root.members.findLast((m) => m.key === 'id')?.value
    if (id === undefined) return undefined
    if (id.t === 'num') return id.raw
    return id.t === 'str' ? JSON.stringify(id.v) : 'null'
  } catch {
    return 'null'
  }
}
