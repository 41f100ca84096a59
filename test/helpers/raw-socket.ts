import { connect, type Socket } from 'node:net'
import { onTestFinished } from 'vitest'

/** A response read off a raw socket: status line, lower-case headers, body text. */
export interface RawSocketResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** True when the server closed the connection. */
  readonly closed: boolean
}

/**
 * Writes `parts` to 127.0.0.1:`port` exactly as given (`delayMs` between parts), for requests no
 * HTTP client would send: duplicate headers, lying Content-Length, stalled bodies. Resolves after
 * one response, when the server closes, or after `timeoutMs`.
 */
export function sendRaw(
  port: number,
  parts: readonly (string | Buffer)[],
  opts: { delayMs?: number; timeoutMs?: number } = {},
): Promise<RawSocketResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let closed = false
    const timer = setTimeout(() => finish(), opts.timeoutMs ?? 5000)
    function finish(): void {
      clearTimeout(timer)
      socket.destroy()
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      if (split === -1)
        return reject(new Error(`no HTTP response: ${JSON.stringify(text.slice(0, 200))}`))
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const i = line.indexOf(':')
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
      }
      let body = text.slice(split + 4)
      if (headers['transfer-encoding'] === 'chunked') body = dechunk(body)
      resolve({ status: Number(statusLine?.split(' ')[1]), headers, body, closed })
    }
    socket.on('data', (c: Buffer) => {
      chunks.push(c)
      if (isComplete(Buffer.concat(chunks).toString('utf8'))) finish()
    })
    socket.on('close', () => {
      closed = true
      finish()
    })
    socket.on('error', () => undefined)
    socket.on('connect', async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0 && opts.delayMs !== undefined)
          await new Promise((r) => setTimeout(r, opts.delayMs))
        if (socket.destroyed) return
        socket.write(part)
      }
    })
  })
}

function isComplete(text: string): boolean {
  const split = text.indexOf('\r\n\r\n')
  if (split === -1) return false
  const head = text.slice(0, split).toLowerCase()
  const body = text.slice(split + 4)
  const cl = /\r\ncontent-length:\s*(\d+)/.exec(head)
  if (cl !== null) return Buffer.byteLength(body) >= Number(cl[1])
  if (head.includes('transfer-encoding: chunked')) return body.endsWith('0\r\n\r\n')
  return false
}

function dechunk(body: string): string {
  let out = ''
  let rest = body
  for (;;) {
    const nl = rest.indexOf('\r\n')
    if (nl === -1) return out
    const size = parseInt(rest.slice(0, nl), 16)
    if (!(size > 0)) return out
    out += rest.slice(nl + 2, nl + 2 + size)
    rest = rest.slice(nl + 2 + size + 2)
  }
}

/** A request line plus headers, CRLF-joined, ready for sendRaw. */
export function httpHead(
  method: string,
  path: string,
  headers: readonly (readonly [string, string])[],
): string {
  return `${method} ${path} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`
}

/**
 * Writes `request` to 127.0.0.1:`port` and never reads the answer: the socket is paused, so the
 * server's writes to it back up once the kernel buffers are full (a client that stalls). Destroyed
 * when the test ends; `bytesRead` tells how much of the answer the client took.
 */
export function stalledRequest(port: number, request: string | Buffer): Socket {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => undefined)
  socket.write(request)
  socket.pause()
  onTestFinished(() => void socket.destroy())
  return socket
}
