import { connect } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders } from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { sendRaw } from '../helpers/raw-socket.js'
import { startRecordingBackend, type RecordingBackend } from '../helpers/recording-backend.js'

/**
 * How a request reaches hono (src/pipeline/node-response.ts, docs/design/hot-path.md): the request
 * target is routed as RFC 9112 §3.2 allows it (origin-form, absolute-form), dot segments resolved
 * as any URL parser would, a target that is not a path refused before anything runs, and an
 * answer given before the body arrived does not leave the connection held by a trickled body.
 */

async function setup(): Promise<{ gw: TestGateway; backend: RecordingBackend; port: number }> {
  const backend = await startRecordingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway(oneServer(`${backend.origin}/mcp`))
  return { gw, backend, port: gw.port }
}

/** A tools/call with `target` on the request line, as raw bytes. */
function call(target: string, id: number): string {
  const body = JSON.stringify(mcpBody('tools/call', { name: 'echo', arguments: {} }, id))
  const headers = Object.entries({ ...mcpHeaders('tools/call', 'echo'), host: '127.0.0.1' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')
  return `POST ${target} HTTP/1.1\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

describe('the Node listener', () => {
  it('routes origin-form and absolute-form targets, dot segments resolved', async () => {
    const { backend, port } = await setup()
    for (const [i, target] of [
      '/mcp/app',
      '/mcp/other/../app',
      'http://example.test/mcp/app',
    ].entries()) {
      const res = await sendRaw(port, [call(target, i + 1)])
      expect(res.status, target).toBe(200)
      expect(JSON.parse(res.body)).toMatchObject({ jsonrpc: '2.0', id: i + 1 })
    }
    expect(backend.requests).toHaveLength(3)
  })

  it('refuses a backslash in the path with 400 and forwards nothing', async () => {
    const { backend, port } = await setup()
    const res = await sendRaw(port, [call('/mcp\\app', 7)])
    expect(res.status).toBe(400)
    expect(res.headers['connection']).toBe('close')
    expect(backend.requests).toHaveLength(0)
  })

  it('a target that resolves to no server is the JSON-RPC unknown-server error', async () => {
    const { backend, port } = await setup()
    const res = await sendRaw(port, [call('/mcp/app/../nope', 9)])
    expect(res.status).toBe(404)
    // The body of a request for no server is never read, so the error carries id null.
    expect(JSON.parse(res.body)).toMatchObject({
      id: null,
      error: { data: { reason: 'unknown_server' } },
    })
    expect(backend.requests).toHaveLength(0)
  })

  it('closes a connection whose body keeps trickling after an early answer', async () => {
    const { backend, port } = await setup()
    const socket = connect(port, '127.0.0.1')
    let received = ''
    let closed = false
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')))
    socket.on('error', () => undefined)
    socket.on('close', () => (closed = true))
    onTestFinished(() => void socket.destroy())
    // text/plain is refused (415) before the body is read; the chunked body never ends.
    socket.write(
      'POST /mcp/app HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n' +
        'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n',
    )
    const trickle = setInterval(() => {
      if (!socket.destroyed) socket.write('1\r\nx\r\n')
    }, 50)
    onTestFinished(() => clearInterval(trickle))
    await expect.poll(() => received).toMatch(/^HTTP\/1\.1 415 /)
    // Drained for at most 500 ms, then closed (docs/design/hot-path.md).
    await expect.poll(() => closed, { timeout: 3000 }).toBe(true)
    expect(backend.requests).toHaveLength(0)
  })
})
