import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { SessionStreams, StreamRefused, getHeaders } from '../../../src/client/session-stream.js'

/** A member whose GET answers are decided per request; `open` holds the streams it serves. */
async function member(answer: (n: number, res: ServerResponse) => void) {
  const open = new Set<ServerResponse>()
  let gets = 0
  const server = createServer((req, res) => {
    if (req.method !== 'GET') return void res.writeHead(405).end()
    gets++
    res.on('close', () => open.delete(res))
    answer(gets, res)
    if (res.headersSent && !res.writableEnded) open.add(res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  onTestFinished(() => {
    server.closeAllConnections()
    return new Promise<void>((r) => server.close(() => r()))
  })
  const dispatcher = new Agent()
  onTestFinished(() => dispatcher.destroy())
  const ep = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    headers: getHeaders(['content-type', 'application/json', 'x-configured', 'a'], {
      version: '2025-11-25',
      sessionId: 's-1',
    }),
    dispatcher,
    headersTimeoutMs: 5000,
    bodyTimeoutMs: 0,
  }
  return { ep, open, gets: () => gets }
}

function stream(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  res.flushHeaders()
}

const progress = (n: number) =>
  `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":${n}}}\n\n`

describe('SessionStreams', () => {
  it('opens one GET per session for every reader, and closes it with the last', async () => {
    const m = await member((_n, res) => stream(res))
    const streams = new SessionStreams()
    const session = {}
    const a: unknown[] = []
    const b: unknown[] = []
    const first = streams.tap(session, m.ep, (msg) => void a.push(msg))
    await first.opened
    const second = streams.tap(session, m.ep, (msg) => void b.push(msg))
    await second.opened
    expect(m.gets()).toBe(1)
    for (const res of m.open) res.write(progress(1))
    await expect.poll(() => [a.length, b.length]).toEqual([1, 1])
    first.close()
    await expect(first.ended).resolves.toBeInstanceOf(Error)
    // the other reader still has it
    for (const res of m.open) res.write(progress(2))
    await expect.poll(() => b.length).toBe(2)
    expect(a).toHaveLength(1)
    second.close()
    await expect.poll(() => m.open.size).toBe(0)
    // a new reader opens a new stream
    const third = streams.tap(session, m.ep, () => undefined)
    await third.opened
    expect(m.gets()).toBe(2)
    third.close()
  })

  it('sends the GET with the session headers, accepting only a stream', async () => {
    const seen: Record<string, string | string[] | undefined>[] = []
    const m = await member((_n, res) => {
      seen.push(res.req.headers)
      stream(res)
    })
    const tap = new SessionStreams().tap({}, m.ep, () => undefined)
    await tap.opened
    expect(seen[0]).toMatchObject({
      accept: 'text/event-stream',
      'mcp-session-id': 's-1',
      'mcp-protocol-version': '2025-11-25',
      'x-configured': 'a',
    })
    expect(seen[0]).not.toHaveProperty('content-type')
    tap.close()
  })

  it('asks again when the member still holds the stream it was just closed (409)', async () => {
    const m = await member((n, res) => {
      if (n === 1) return void res.writeHead(409, { 'content-type': 'application/json' }).end('{}')
      stream(res)
    })
    const tap = new SessionStreams().tap({}, m.ep, () => undefined)
    await tap.opened
    expect(m.gets()).toBe(2)
    tap.close()
  })

  it('rejects the opening with the status of a member that offers no stream', async () => {
    const m = await member((_n, res) => void res.writeHead(405).end())
    const tap = new SessionStreams().tap({}, m.ep, () => undefined)
    await expect(tap.opened).rejects.toMatchObject({ name: 'StreamRefused', status: 405 })
    await expect(tap.ended).resolves.toBeInstanceOf(StreamRefused)
  })
})
