import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer as createTcpServer, connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server'
import { describe, expect, it, onTestFinished } from 'vitest'
import { serveMcpHandler } from '../../deploy/demo/serve.js'
import {
  connectClient,
  envelope,
  mcpBody,
  mcpHeaders,
  mcpPost,
  rawPost,
  type RawResponse,
} from '../helpers/clients.js'
import { adminUrl, oneServer, startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { closeServer, listenOn, startTrap } from '../helpers/tokens.js'

/**
 * The response side of the trust boundary: what a backend answers reaches the client only as an
 * MCP answer to the request it was sent. Hop-by-hop headers and those the backend nominates in
 * Connection stop at the gateway; redirects are never followed or relayed; a 2xx body is JSON or
 * SSE; an answer the gateway reads (policy list filter, cache capture) carries the request's id.
 */

const POLICY = `
rules:
  - name: weather
    servers: [app]
    allow:
      tools: [forecast_zurich, echo, search]
`

interface Backend {
  readonly url: string
  /** JSON-RPC bodies received, oldest first. */
  readonly requests: Record<string, unknown>[]
}

type Reply = (body: Record<string, unknown>, res: ServerResponse, req: IncomingMessage) => void

/** A node:http backend answering each POST with `reply` (full control of status, headers, bytes). */
async function backend(reply: Reply): Promise<Backend> {
  const requests: Record<string, unknown>[] = []
  const { server, url } = await listenOn((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<
        string,
        unknown
      >
      requests.push(body)
      reply(body, res, req)
    })
  })
  onTestFinished(() => closeServer(server))
  return { url: `${url}/mcp`, requests }
}

/** The JSON-RPC answer to `body` with this result, as a backend would write it. */
function answer(
  body: Record<string, unknown>,
  result: Record<string, unknown>,
  id: unknown = body['id'],
): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result })
}

const TOOLS = {
  tools: ['echo', 'search', 'delete_repo'].map((name) => ({
    name,
    inputSchema: { type: 'object' },
  })),
  resultType: 'complete',
}

async function gateway(
  url: string,
  extra: Record<string, unknown> = {},
  server: Record<string, unknown> = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-response-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  const gw = await startTestGateway({ ...oneServer(url, server), ...extra }, { dir })
  return { gw, url: gw.mcpUrl('app') }
}

/** A gateway error: status, reason, JSON-RPC code and the echoed id. */
function expectGatewayError(res: RawResponse, status: number, reason: string, id: unknown): void {
  expect(res.status, res.text).toBe(status)
  expect(res.headers['x-mcp-gateway-error']).toBe(reason)
  const msg = res.json() as {
    id: unknown
    error: { code: number; data: { reason: string; source: string } }
  }
  expect(msg.id).toEqual(id)
  expect(msg.error.code).toBe(-31502)
  expect(msg.error.data).toMatchObject({ source: 'gateway', reason })
}

describe('response headers', () => {
  it('drops hop-by-hop headers, every header the backend nominates in Connection, and Alt-Svc', async () => {
    const be = await backend((body, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        connection: 'keep-alive, X-Backend-Secret, x-route-hint',
        'x-backend-secret': 'internal-token',
        'x-route-hint': 'replica-3',
        'keep-alive': 'timeout=5',
        'alt-svc': 'h2="evil.example:443"',
        'proxy-authenticate': 'Basic realm="backend"',
        'x-kept': 'yes',
      })
      res.end(answer(body, TOOLS))
    })
    const { url } = await gateway(be.url)
    const res = await mcpPost(url, 'tools/list', {}, { id: 4 })
    expect(res.status, res.text).toBe(200)
    expect(res.headers['x-kept']).toBe('yes')
    for (const name of ['x-backend-secret', 'x-route-hint', 'alt-svc', 'proxy-authenticate']) {
      expect(res.headers[name], name).toBeUndefined()
    }
    expect(String(res.headers['connection'] ?? '')).not.toMatch(/secret|route/i)
    expect((res.json() as { id: number }).id).toBe(4)
  })

  it('a Content-Type the backend nominates in Connection is gone, so the 2xx body is refused', async () => {
    const be = await backend((body, res) => {
      res.writeHead(200, { 'content-type': 'application/json', connection: 'content-type' })
      res.end(answer(body, TOOLS))
    })
    const { url } = await gateway(be.url)
    const res = await mcpPost(url, 'tools/list', {}, { id: 'ct-1' })
    expectGatewayError(res, 502, 'upstream_bad_content_type', 'ct-1')
    expect(be.requests).toHaveLength(1)
  })
})

describe('redirects', () => {
  it.each([301, 302, 303, 307, 308])(
    'a %i is answered 502 upstream_redirect: not followed, not relayed, not retried',
    async (status) => {
      const trap = await startTrap()
      onTestFinished(() => trap.close())
      const be = await backend((body, res) => {
        res.writeHead(status, { location: trap.url, 'content-type': 'application/json' })
        // a body too: the 3xx must not reach the client even with one
        res.end(answer(body, TOOLS))
      })
      const { url } = await gateway(be.url)
      // tools/list is retry-safe: a retry would show up as a second request
      const res = await mcpPost(url, 'tools/list', {}, { id: 12345678901234567890n.toString() })
      expectGatewayError(res, 502, 'upstream_redirect', '12345678901234567890')
      expect(res.headers['location']).toBeUndefined()
      expect(trap.hits).toBe(0)
      expect(be.requests).toHaveLength(1)
    },
  )

  it('a redirecting replica is not ejected (a misconfiguration, not a transient fault)', async () => {
    const trap = await startTrap()
    onTestFinished(() => trap.close())
    const be = await backend((_body, res) => void res.writeHead(307, { location: trap.url }).end())
    const ok = await backend((body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer(body, TOOLS))
    })
    const { gw, url } = await gateway(
      be.url,
      {},
      {
        upstreams: [{ url: be.url }, { url: ok.url }],
        outlier: { consecutiveFailures: 1 },
      },
    )
    // Ties between idle replicas are broken at random: ask until the redirecting one was chosen
    // twice. Counted as a fault, one redirect (consecutiveFailures: 1) would have ejected it.
    for (let i = 0; i < 200 && be.requests.length < 2; i++) {
      const res = await mcpPost(url, 'tools/list', {}, { id: i })
      expect([200, 502]).toContain(res.status)
    }
    expect(be.requests.length).toBe(2)
    const ready = (await (await fetch(`${adminUrl(gw)}/readyz`)).json()) as {
      upstreamsOut: unknown[]
    }
    expect(ready.upstreamsOut).toEqual([])
    expect(trap.hits).toBe(0)
  })
})

describe('2xx content types', () => {
  const html = '<html><body>Sign in</body></html>'
  it.each([
    ['text/html with Content-Length', { 'content-type': 'text/html' }, false],
    ['text/html, chunked', { 'content-type': 'text/html' }, true],
    ['no content type, with Content-Length', {}, false],
    ['no content type, chunked', {}, true],
    ['application/jsonp', { 'content-type': 'application/jsonp' }, false],
    ['text/event-streams', { 'content-type': 'text/event-streams' }, false],
  ])('%s → 502 upstream_bad_content_type', async (_name, headers, chunked) => {
    const be = await backend((_body, res) => {
      res.writeHead(200, headers)
      if (chunked) {
        res.write(html.slice(0, 10))
        res.end(html.slice(10))
      } else res.end(html)
    })
    const { url } = await gateway(be.url)
    const res = await mcpPost(url, 'tools/call', { name: 'echo', arguments: {} }, { id: 'c-1' })
    expectGatewayError(res, 502, 'upstream_bad_content_type', 'c-1')
    expect(res.text).not.toContain('Sign in')
    expect(be.requests).toHaveLength(1) // never retried
  })

  it.each([
    'application/json',
    'Application/JSON; charset=utf-8',
    'application/json;charset=UTF-8',
  ])('%s is an answer', async (type) => {
    const be = await backend(
      (body, res) => void res.writeHead(200, { 'content-type': type }).end(answer(body, TOOLS)),
    )
    const { url } = await gateway(be.url)
    const res = await mcpPost(url, 'tools/list', {}, { id: 2 })
    expect(res.status, res.text).toBe(200)
    expect((res.json() as { id: number }).id).toBe(2)
  })

  it('TEXT/EVENT-STREAM with parameters is a stream', async () => {
    const be = await backend((body, res) => {
      res.writeHead(200, { 'content-type': 'TEXT/Event-Stream; charset=utf-8' })
      res.end(`event: message\ndata: ${answer(body, TOOLS)}\n\n`)
    })
    const { url } = await gateway(be.url)
    const res = await mcpPost(url, 'tools/list', {}, { id: 3 })
    expect(res.status, res.text).toBe(200)
    expect(res.headers['x-accel-buffering']).toBe('no') // relayed as a stream
    expect(res.text).toBe(`event: message\ndata: ${answer({ id: 3 }, TOOLS)}\n\n`)
  })

  it('a 202 without a body (a notification accepted) and an empty 200 pass', async () => {
    const be = await backend((body, res) => {
      if (body['id'] === undefined) res.writeHead(202).end()
      else res.writeHead(200).end()
    })
    const { url } = await gateway(be.url)
    const sent = await rawPost(
      url,
      {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 1, _meta: envelope() },
      },
      mcpHeaders('notifications/cancelled'),
    )
    expect(sent.status, sent.text).toBe(202)
    expect(sent.text).toBe('')
    const empty = await mcpPost(url, 'tools/list', {}, { id: 5 })
    expect(empty.status, empty.text).toBe(200)
    expect(empty.text).toBe('')
  })
})

describe('answers the gateway reads carry the request id', () => {
  const wrongId: Reply = (body, res) => {
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(answer(body, TOOLS, 'someone-else'))
  }

  it('policy list filter (rewrite): an answer for another id → 502 upstream_id_mismatch, unfiltered tools never shown', async () => {
    const be = await backend(wrongId)
    const { url } = await gateway(be.url, { policies: '.' })
    const res = await mcpPost(url, 'tools/list', {}, { id: 'mine' })
    expectGatewayError(res, 502, 'upstream_id_mismatch', 'mine')
    expect(res.text).not.toContain('delete_repo')
    expect(be.requests).toHaveLength(1)
  })

  it('cache capture (observe): an answer for another id → 502, and it is not cached', async () => {
    let wrong = true
    const be = await backend((body, res) => {
      const id = wrong ? 'someone-else' : body['id']
      const result = { ...TOOLS, ttlMs: 60_000, cacheScope: 'public' }
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer(body, result, id))
    })
    const { url } = await gateway(be.url, { cache: {} })
    const first = await mcpPost(url, 'tools/list', {}, { id: 7 })
    expectGatewayError(first, 502, 'upstream_id_mismatch', 7)
    wrong = false
    const second = await mcpPost(url, 'tools/list', {}, { id: 8 })
    expect(second.status, second.text).toBe(200)
    expect(second.response().id).toBe(8)
    // the bad answer was not served from the cache
    expect(be.requests.filter((r) => r['method'] === 'tools/list')).toHaveLength(2)
  })

  it('big integer ids compare by their digits: 2^53 is not an answer to 2^53 + 1', async () => {
    const be = await backend((_body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(`{"jsonrpc":"2.0","id":9007199254740992,"result":${JSON.stringify(TOOLS)}}`)
    })
    const { url } = await gateway(be.url, { policies: '.' })
    const raw = await fetch(url, {
      method: 'POST',
      headers: mcpHeaders('tools/list'),
      body: JSON.stringify(mcpBody('tools/list')).replace('"id":1,', '"id":9007199254740993,'),
    })
    const text = await raw.text()
    expect(raw.status, text).toBe(502)
    expect(raw.headers.get('x-mcp-gateway-error')).toBe('upstream_id_mismatch')
    expect(text).toContain('"id":9007199254740993,')
  })

  it('SSE with the policy filter: a response event for another id becomes an in-band error for this one', async () => {
    const be = await backend((body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n',
      )
      res.end(`event: message\ndata: ${answer(body, TOOLS, 'someone-else')}\n\n`)
    })
    const { url } = await gateway(be.url, { policies: '.' })
    const res = await mcpPost(url, 'tools/list', {}, { id: 'sse-1' })
    expect(res.status).toBe(200) // the head was already out: the error travels in band
    const answerMsg = res.response()
    expect(answerMsg.id).toBe('sse-1')
    expect(answerMsg.error?.code).toBe(-31502)
    expect(answerMsg.error?.data).toMatchObject({
      source: 'gateway',
      reason: 'upstream_id_mismatch',
    })
    expect(res.text).not.toContain('delete_repo')
    expect(res.text).not.toContain('someone-else')
  })
})

describe('SSE text survives any network split, end to end with the official SDK', () => {
  const DESCRIPTIONS = {
    forecast_zurich: 'Wetter für Zürich ☃ — Schnee ❄ und Föhn 𝄞 (ünïcödé)',
    delete_station: 'Löscht eine Station ☃☃☃ für immer',
  }

  /** An official v2 SDK server answering in SSE, with non-ASCII tool descriptions. */
  async function sdkServer() {
    const handler = createMcpHandler(
      () => {
        const server = new McpServer({ name: 'wetter', version: '1.0.0' })
        for (const [name, description] of Object.entries(DESCRIPTIONS)) {
          server.registerTool(name, { description }, () => ({
            content: [{ type: 'text', text: description }],
          }))
        }
        return server
      },
      { legacy: 'reject', responseMode: 'sse' },
    )
    const http = await serveMcpHandler(handler)
    onTestFinished(() => http.close())
    return http
  }

  /**
   * A TCP relay that cuts the backend's bytes inside every multi-byte character and sends each
   * piece on its own after a pause, so the gateway reads characters split across chunks.
   */
  async function splittingRelay(port: number): Promise<{ url: string; cuts: () => number }> {
    let cuts = 0
    const sockets = new Set<Socket>()
    const server = createTcpServer((client) => {
      const upstream = connect(port, '127.0.0.1')
      client.setNoDelay(true)
      sockets.add(client).add(upstream)
      client.pipe(upstream)
      let queue = Promise.resolve()
      upstream.on('data', (chunk: Buffer) => {
        const pieces: Buffer[] = []
        let from = 0
        for (let i = 0; i < chunk.length; i++) {
          // cut after the lead byte of every multi-byte UTF-8 sequence
          if ((chunk[i] as number) >= 0xc0) {
            pieces.push(chunk.subarray(from, i + 1))
            from = i + 1
            cuts++
          }
        }
        pieces.push(chunk.subarray(from))
        queue = queue.then(async () => {
          for (const piece of pieces) {
            if (client.destroyed) return
            client.write(piece)
            await new Promise((r) => setTimeout(r, 3))
          }
        })
      })
      const end = (): void => {
        void queue.then(() => client.end())
      }
      upstream.on('end', end)
      upstream.on('error', () => client.destroy())
      client.on('error', () => upstream.destroy())
      client.on('close', () => upstream.destroy())
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    onTestFinished(
      () =>
        new Promise<void>((r) => {
          for (const s of sockets) s.destroy()
          server.close(() => r())
        }),
    )
    const address = server.address() as { port: number }
    return { url: `http://127.0.0.1:${address.port}/mcp`, cuts: () => cuts }
  }

  it.each([
    ['the policy filter (rewrite)', { policies: '.' }, ['forecast_zurich']],
    ['the cache capture (observe)', { cache: {} }, ['forecast_zurich', 'delete_station']],
    ['a plain stream (framer)', {}, ['forecast_zurich', 'delete_station']],
  ])('through %s the v2 client sees the exact text', async (_name, extra, names) => {
    const sdk = await sdkServer()
    const relay = await splittingRelay(sdk.port)
    const { url } = await gateway(relay.url, extra)
    const client = await closing(connectClient(url, { pin: true }))
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(names)
    for (const tool of tools) {
      expect(tool.description).toBe(DESCRIPTIONS[tool.name as keyof typeof DESCRIPTIONS])
    }
    expect(relay.cuts()).toBeGreaterThan(10) // the characters really were split on the wire
  })
})
