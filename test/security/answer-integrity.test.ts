import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { envelope, rawPost, type RawResponse } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { closeServer, listenOn } from '../helpers/tokens.js'

/**
 * What reaches the client is the answer to its request, on every path (docs/security.md "What
 * the gateway relays"): a JSON body that is not one JSON-RPC response with the request's id, and
 * an SSE stream whose response carries another id, are never delivered; where the gateway must
 * change the answer (a policy filter), one it cannot read exactly as every client would is a 502
 * (in band on a stream), never relayed unchanged. Mock backends: real servers do not answer with
 * HTML pages, other requests' ids or `NaN` on purpose.
 */

const ERAS = [
  {
    era: '2026-07-28',
    headers: (method: string) => ({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
    }),
    params: (p: Record<string, unknown> = {}) => ({ ...p, _meta: envelope() }),
  },
  {
    era: '2025-11-25',
    headers: (_method: string) => ({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    }),
    params: (p: Record<string, unknown> = {}) => p,
  },
] as const

const POLICY = `
rules:
  - name: app
    servers: [app]
    allow:
      tools: [echo, search]
`

interface Backend {
  readonly url: string
  /** Raw request bodies received. */
  readonly bodies: string[]
}

type Reply = (rawId: string | undefined, res: ServerResponse, body: string) => void

async function backend(reply: Reply): Promise<Backend> {
  const bodies: string[] = []
  const { server, url } = await listenOn((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      bodies.push(body)
      const id = /"id":("[^"]*"|-?[0-9]+)/.exec(body)?.[1]
      reply(id, res, body)
    })
  })
  onTestFinished(() => closeServer(server))
  return { url: `${url}/mcp`, bodies }
}

async function gateway(url: string, policies = false): Promise<string> {
  let dir: string | undefined
  if (policies) {
    dir = mkdtempSync(join(tmpdir(), 'mcp-edge-answer-'))
    const d = dir
    onTestFinished(() => rmSync(d, { recursive: true, force: true }))
    writeFileSync(join(dir, 'main.yaml'), POLICY)
  }
  const gw = await startTestGateway(
    { ...oneServer(url, { trustHeaders: false }), ...(policies && { policies: '.' }) },
    dir === undefined ? {} : { dir },
  )
  return gw.mcpUrl('app')
}

function expectRefused(res: RawResponse, status: number, reason: string, id: unknown): void {
  expect(res.status, res.text).toBe(status)
  const msg = res.response()
  expect(msg.id).toEqual(id)
  expect(msg.error?.code).toBe(-31502)
  expect(msg.error?.data).toMatchObject({ source: 'gateway', reason })
}

const json = (res: ServerResponse, text: string, status = 200): void => {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(text)
}

const OTHER =
  '{"jsonrpc":"2.0","id":"someone-else","result":{"content":[{"type":"text","text":"SECRET"}]}}'

describe.each(ERAS)('every answer, $era client, no policies', (e) => {
  const call = (url: string, id: string | number = 'c-1') =>
    rawPost(
      url,
      {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: e.params({ name: 'echo', arguments: {} }),
      },
      { ...e.headers('tools/call'), 'mcp-name': 'echo' },
    )

  it('a 200 application/json that is not JSON (an HTML page) → 502 upstream_unreadable', async () => {
    const be = await backend((_id, res) => json(res, '<html><body>Bad gateway</body></html>'))
    const res = await call(await gateway(be.url))
    expectRefused(res, 502, 'upstream_unreadable', 'c-1')
    expect(res.text).not.toContain('html')
    expect(be.bodies).toHaveLength(1)
  })

  it('a 200 JSON-RPC response with another id → 502 upstream_id_mismatch, never delivered', async () => {
    const be = await backend((_id, res) => json(res, OTHER))
    const res = await call(await gateway(be.url))
    expectRefused(res, 502, 'upstream_id_mismatch', 'c-1')
    expect(res.text).not.toContain('SECRET')
  })

  it('a 200 JSON body that is no JSON-RPC response, or two of them → 502', async () => {
    for (const text of ['{"detail":"ok"}', `{"jsonrpc":"2.0","id":"c-1","result":{}}${OTHER}`]) {
      const be = await backend((_id, res) => json(res, text))
      const res = await call(await gateway(be.url))
      expectRefused(res, 502, 'upstream_unreadable', 'c-1')
      expect(res.text).not.toContain('SECRET')
    }
  })

  it('a large answer with another id, streamed in chunks, is cut: the client never has it whole', async () => {
    const filler = 'x'.repeat(64 * 1024)
    const be = await backend((_id, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"SECRET`)
      for (let i = 0; i < 6; i++) res.write(filler)
      setTimeout(() => res.end(`"}]},"id":"someone-else"}`), 20)
    })
    const url = await gateway(be.url)
    const outcome = await call(url).then(
      (r) => (r.text.endsWith('}') ? 'delivered' : 'cut'),
      () => 'cut',
    )
    expect(outcome).toBe('cut')
    // the same answer with this request's id goes through whole
    const good = await backend((id, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"`)
      for (let i = 0; i < 6; i++) res.write(filler)
      setTimeout(() => res.end(`"}]},"id":${id}}`), 20)
    })
    const ok = await call(await gateway(good.url))
    expect(ok.status).toBe(200)
    expect(ok.response().id).toBe('c-1')
  })

  it('an SSE response event with another id becomes an in-band error for this request', async () => {
    const be = await backend((_id, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n',
      )
      res.end(`event: message\ndata: ${OTHER}\n\n`)
    })
    const res = await call(await gateway(be.url))
    expect(res.status).toBe(200) // the head was out: the error travels in band
    expect(res.text).not.toContain('SECRET')
    const msg = res.response()
    expect(msg.id).toBe('c-1')
    expect(msg.error?.data).toMatchObject({ source: 'gateway', reason: 'upstream_id_mismatch' })
  })

  it('an SSE event whose data starts as JSON and is not one object ends the stream in band', async () => {
    const be = await backend((id, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(`event: message\ndata: [{"jsonrpc":"2.0","id":${id},"result":{}}]\n\n`)
    })
    const res = await call(await gateway(be.url))
    expect(res.response().error?.data).toMatchObject({ reason: 'upstream_unreadable' })
  })

  it('a 5xx JSON-RPC error with another id is not relayed as this answer', async () => {
    const be = await backend((_id, res) =>
      json(
        res,
        '{"jsonrpc":"2.0","id":"someone-else","error":{"code":-32603,"message":"SECRET"}}',
        500,
      ),
    )
    const res = await call(await gateway(be.url))
    expectRefused(res, 502, 'upstream_id_mismatch', 'c-1')
    expect(res.text).not.toContain('SECRET')
  })

  it('an error with id null (the backend could not read the request) is relayed', async () => {
    const text = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    const be = await backend((_id, res) => json(res, text, 400))
    const res = await call(await gateway(be.url))
    expect(res.status).toBe(400)
    expect(res.text).toBe(text)
  })

  it('a well-formed answer passes byte for byte, Content-Length kept', async () => {
    let sent = ''
    const be = await backend((id, res) => {
      sent = `{"result":{"content":[{"type":"text","text":"ok \\u00e9"}]},"jsonrpc":"2.0","id":${id}}`
      json(res, sent)
    })
    const res = await call(await gateway(be.url), 7)
    expect(res.status).toBe(200)
    expect(res.text).toBe(sent)
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(sent)))
  })

  it('a notification answered with a response carrying an id → 502, nothing delivered', async () => {
    const be = await backend((_id, res) => json(res, OTHER))
    const headers: Record<string, string> = { ...e.headers('tools/call') }
    delete headers['mcp-method']
    const res = await rawPost(
      await gateway(be.url),
      {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: e.params({ requestId: 1 }),
      },
      headers,
    )
    expect(res.status).toBe(502)
    expect(res.headers['x-mcp-gateway-error']).toBe('upstream_id_mismatch')
    expect(res.text).not.toContain('SECRET')
  })
})

describe.each(ERAS)('where the gateway must filter, $era client', (e) => {
  const list = (url: string) =>
    rawPost(
      url,
      { jsonrpc: '2.0', id: 'l-1', method: 'tools/list', params: e.params() },
      e.headers('tools/list'),
    )
  const tool = (name: string, extra = '') =>
    `{"name":"${name}"${extra},"inputSchema":{"type":"object"}}`

  it('an SSE tools/list with a bare NaN (Python reads it) → in-band upstream_unreadable, no denied tool', async () => {
    const be = await backend((id, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(
        `event: message\ndata: {"jsonrpc":"2.0","id":${id},"result":{"tools":[${tool('echo', ',"description":NaN')},${tool('delete_repo')}]}}\n\n`,
      )
    })
    const res = await list(await gateway(be.url, true))
    expect(res.text).not.toContain('delete_repo')
    expect(res.response().id).toBe('l-1')
    expect(res.response().error?.data).toMatchObject({ reason: 'upstream_unreadable' })
  })

  it('a JSON tools/list with NaN → 502 upstream_unreadable', async () => {
    const be = await backend((id, res) =>
      json(
        res,
        `{"jsonrpc":"2.0","id":${id},"result":{"tools":[${tool('echo', ',"x":NaN')},${tool('delete_repo')}]}}`,
      ),
    )
    const res = await list(await gateway(be.url, true))
    expectRefused(res, 502, 'upstream_unreadable', 'l-1')
    expect(res.text).not.toContain('delete_repo')
  })

  it.each([
    [
      'a name written twice (first-wins readers see delete_repo)',
      '{"name":"delete_repo","name":"echo","inputSchema":{}}',
    ],
    [
      'a name and a Name (Go reads keys case-insensitively)',
      '{"name":"echo","Name":"delete_repo","inputSchema":{}}',
    ],
  ])('%s → 502 upstream_unreadable, never relayed', async (_why, item) => {
    const be = await backend((id, res) =>
      json(res, `{"jsonrpc":"2.0","id":${id},"result":{"tools":[${item}]}}`),
    )
    const res = await list(await gateway(be.url, true))
    expectRefused(res, 502, 'upstream_unreadable', 'l-1')
    expect(res.text).not.toContain('delete_repo')
  })

  it('a schema with properties that differ only by case is a valid list', async () => {
    const be = await backend((id, res) =>
      json(
        res,
        `{"jsonrpc":"2.0","id":${id},"result":{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"Name":{},"name":{}}}},${tool('delete_repo')}]}}`,
      ),
    )
    const res = await list(await gateway(be.url, true))
    expect(res.status, res.text).toBe(200)
    const tools = (res.response().result as { tools: { name: string }[] }).tools
    expect(tools.map((t) => t.name)).toEqual(['echo'])
  })
})
