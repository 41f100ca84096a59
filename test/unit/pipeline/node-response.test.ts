import { createServer, request, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { ALREADY_SENT, nodeListener, type AppFetch } from '../../../src/pipeline/node-response.js'

/**
 * What the listener keeps of a request once hono's answer is in: a stream still being written
 * (the stages returned at its head) lets go of the request's header lines, which nothing reads
 * again; any other request keeps Node's objects as they are.
 */
async function serve(app: AppFetch): Promise<{ port: number; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = []
  const listener = nodeListener(app, () => undefined)
  const server = createServer((req, res) => {
    seen.push(req)
    listener(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(() => {
    server.closeAllConnections()
    server.close()
  })
  return { port: (server.address() as AddressInfo).port, seen }
}

/** Sends a GET with a token and resolves with the response once its head arrived. */
function get(port: number): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({
      port,
      host: '127.0.0.1',
      path: '/mcp/app',
      headers: { authorization: 'Bearer secret-token', 'x-extra': 'x' },
    })
    req.on('response', resolve)
    req.on('error', reject)
    req.end()
  })
}

describe('nodeListener: what a request keeps after the stages', () => {
  it('a stream still being written lets go of its header lines', async () => {
    const { port, seen } = await serve((_req, { outgoing }) => {
      outgoing.writeHead(200, { 'content-type': 'text/event-stream' })
      outgoing.write(': open\n\n')
      return Promise.resolve(ALREADY_SENT)
    })
    const res = await get(port)
    expect(res.statusCode).toBe(200)
    const incoming = seen[0] as IncomingMessage
    await expect.poll(() => incoming.rawHeaders).toEqual([])
    expect(incoming.headers).toEqual({})
    res.destroy()
  })

  it('a request whose answer is over keeps them', async () => {
    const { port, seen } = await serve((_req, { outgoing }) => {
      outgoing.writeHead(200, { 'content-length': '2' }).end('ok')
      return Promise.resolve(ALREADY_SENT)
    })
    const res = await get(port)
    res.resume()
    await new Promise((resolve) => res.on('end', resolve))
    const incoming = seen[0] as IncomingMessage
    expect(incoming.headers['authorization']).toBe('Bearer secret-token')
    expect(incoming.rawHeaders).toContain('x-extra')
  })
})
