import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, MODERN_VERSION } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { httpHead, sendRaw, type RawSocketResponse } from '../helpers/raw-socket.js'
import {
  startNonValidatingBackend,
  startSdkServer,
  type TestServer,
} from '../helpers/sdk-servers.js'
import { generateTestKey, startJwks } from '../helpers/tokens.js'

/**
 * A header named in `Connection` is hop-by-hop (RFC 9110 §7.6.1): the next hop drops it. If the
 * gateway judged that header, the backend would act on a request without it, e.g. an official SDK
 * server that gets no MCP-Protocol-Version serves the body on its 2025 path, where nothing checks
 * Mcp-Name against the body. So a nominated header the gateway reads, owns or sets is refused with
 * 400 before anything is forwarded; any other nominated header is dropped, as RFC 9110 asks.
 *
 * undici refuses to send a Connection header other than keep-alive/close, so these go over a raw
 * socket.
 */

/** The demo's weather rules (policies/default.yaml): get_* allowed, delete_* denied. */
const POLICY = `
rules:
  - name: everyone-reads-weather
    servers: [weather]
    allow:
      tools: ["get_*"]
  - name: no-deletes-anywhere
    servers: ["*"]
    deny:
      tools: ["delete_*"]
`

type Header = readonly [string, string]

/** A complete POST /mcp/<server> with `headers` after a Host header, and the body. */
function post(server: string, headers: readonly Header[], body: object): string {
  const text = JSON.stringify(body)
  return (
    httpHead('POST', `/mcp/${server}`, [
      ['Host', 'gw.test'],
      ...headers,
      ['Content-Length', String(Buffer.byteLength(text))],
    ]) + text
  )
}

/** The 2026-07-28 headers of a tools/call naming `name`, as an SDK client sends them. */
function toolHeaders(name: string): Header[] {
  return [
    ['Content-Type', 'application/json'],
    ['Accept', 'application/json, text/event-stream'],
    ['MCP-Protocol-Version', MODERN_VERSION],
    ['Mcp-Method', 'tools/call'],
    ['Mcp-Name', name],
  ]
}

const call = (name: string, id: number) =>
  mcpBody('tools/call', { name, arguments: { city: 'Oslo' } }, id)
/**
 * The body of the reported bypass: a denied tool, without the 2026-07-28 `_meta` envelope, so an
 * SDK server that does not see MCP-Protocol-Version takes it for a 2025-era request.
 */
const deleteStation = (id: number) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'delete_station', arguments: { id: 'st-1' } },
})

function expectRefused(res: RawSocketResponse, backend: TestServer): void {
  expect(res.status, res.body).toBe(400)
  expect(res.headers['x-mcp-gateway-error']).toBe('connection_nominates_owned')
  // The front door refuses before the body is read, so no id is readable yet.
  expect(JSON.parse(res.body)).toMatchObject({
    id: null,
    error: { code: -32600, data: { source: 'gateway', reason: 'connection_nominates_owned' } },
  })
  expect(backend.requests).toHaveLength(0)
}

async function sdkBehindDemoPolicy() {
  const backend = await startSdkServer()
  onTestFinished(() => backend.close())
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-connection-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  const gw = await startTestGateway(
    { ...oneServer(backend.url, { trustHeaders: true }, 'weather'), policies: '.' },
    { dir },
  )
  return { backend, gw }
}

async function recording(server: Record<string, unknown> = {}) {
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway(oneServer(backend.url, server))
  return { backend, gw }
}

describe('Connection naming a header the gateway judged', () => {
  it('premise: an SDK server that gets no MCP-Protocol-Version runs the body, whatever Mcp-Name says', async () => {
    // What the backend would have received had the gateway dropped the nominated header.
    const backend = await startSdkServer()
    onTestFinished(() => backend.close())
    const headers = toolHeaders('get_forecast').filter(([k]) => k !== 'MCP-Protocol-Version')
    const res = await sendRaw(backend.port, [
      httpHead('POST', '/mcp', [
        ['Host', 'b'],
        ...headers,
        ['Content-Length', String(JSON.stringify(deleteStation(6)).length)],
      ]) + JSON.stringify(deleteStation(6)),
    ])
    expect(res.body).toContain('deleted station st-1')
  })

  it('the reported bypass: an SDK server with trustHeaders never runs the denied tool in the body', async () => {
    const { backend, gw } = await sdkBehindDemoPolicy()
    const res = await sendRaw(gw.port, [
      post(
        'weather',
        [...toolHeaders('get_forecast'), ['Connection', 'MCP-Protocol-Version']],
        deleteStation(7),
      ),
    ])
    expectRefused(res, backend)
  })

  it('the same request without the Connection trick is judged on its headers and forwarded', async () => {
    // Control for the test above: the SDK server sees the version header and refuses the
    // mismatch itself (trustHeaders: true is the operator saying it does).
    const { backend, gw } = await sdkBehindDemoPolicy()
    const res = await sendRaw(gw.port, [
      post('weather', toolHeaders('get_forecast'), call('get_forecast', 8)),
    ])
    expect(res.status, res.body).toBe(200)
    expect(res.body).toContain('Oslo')
    expect(backend.calls('tools/call')).toHaveLength(1)
  })

  it.each([true, false])(
    'the reported bypass against a recording backend (trustHeaders: %s)',
    async (trustHeaders) => {
      const { backend, gw } = await recording({ trustHeaders })
      const res = await sendRaw(gw.port, [
        post(
          'app',
          [...toolHeaders('get_forecast'), ['Connection', 'MCP-Protocol-Version']],
          deleteStation(9),
        ),
      ])
      expectRefused(res, backend)
    },
  )

  it.each([
    'MCP-Protocol-Version',
    'Mcp-Method',
    'Mcp-Name',
    'Mcp-Param-City',
    'Mcp-Session-Id',
    'Content-Type',
    'Content-Length',
    'Content-Encoding',
    'Transfer-Encoding',
    'Host',
    'Authorization',
    'Origin',
    'Forwarded',
    'X-Forwarded-For',
    'X-Forwarded-Proto',
    'X-Forwarded-Host',
    'X-Forwarded-Prefix',
    'X-Real-IP',
    'X-Api-Key', // configured under servers.app.headers
    'X-Tenant', // the hash-balancing header
  ])('Connection: %s → 400, nothing forwarded', async (name) => {
    const { backend, gw } = await recording({
      trustHeaders: true,
      headers: { 'X-Api-Key': 'gateway-secret' },
      balance: { hash: 'header:X-Tenant' },
    })
    const res = await sendRaw(gw.port, [
      post(
        'app',
        [...toolHeaders('get_forecast'), ['X-Tenant', 't1'], ['Connection', name]],
        call('get_forecast', 10),
      ),
    ])
    expectRefused(res, backend)
  })

  it.each([
    ['with close', [['Connection', 'close, Mcp-Name']]],
    ['with keep-alive, no space, lower case', [['Connection', 'keep-alive,mcp-name']]],
    ['upper case, padded', [['Connection', '  MCP-NAME\t']]],
    ['after empty list members', [['Connection', ', ,mcp-method,']]],
    [
      'in a second Connection header',
      [
        ['Connection', 'keep-alive'],
        ['Connection', 'Mcp-Name'],
      ],
    ],
    [
      'in the first of two Connection headers',
      [
        ['Connection', 'Mcp-Name'],
        ['Connection', 'keep-alive'],
      ],
    ],
    ['after a harmless one', [['Connection', 'x-foo, mcp-protocol-version']]],
  ] as const)('an owned name %s → 400', async (_label, connection) => {
    const { backend, gw } = await recording({ trustHeaders: true })
    const res = await sendRaw(gw.port, [
      post('app', [...toolHeaders('get_forecast'), ...connection], call('get_forecast', 11)),
    ])
    expectRefused(res, backend)
  })

  it('a configured header is owned on its own server only', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      servers: {
        keyed: {
          upstreams: [{ url: backend.url }],
          trustHeaders: true,
          headers: { 'X-Api-Key': 's' },
        },
        plain: { upstreams: [{ url: backend.url }], trustHeaders: true },
      },
    })
    const headers: Header[] = [
      ...toolHeaders('get_forecast'),
      ['Connection', 'x-api-key'],
      ['X-Api-Key', 'c'],
    ]
    expectRefused(
      await sendRaw(gw.port, [post('keyed', headers, call('get_forecast', 12))]),
      backend,
    )
    const res = await sendRaw(gw.port, [post('plain', headers, call('get_forecast', 13))])
    expect(res.status, res.body).toBe(200)
    expect(backend.requests).toHaveLength(1)
    expect(backend.requests[0]?.header('x-api-key')).toBeUndefined()
  })
})

describe('where the check sits (docs/design/check-order.md step 4)', () => {
  async function guarded() {
    const key = await generateTestKey('ES256')
    const jwks = await startJwks([key])
    onTestFinished(() => jwks.close())
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway({
      ...oneServer(backend.url),
      origins: ['https://app.example.test'],
      auth: {
        publicUrl: 'https://mcp.example.test',
        jwt: { issuer: 'https://idp.example.test', jwksUrl: jwks.url },
      },
    })
    return { backend, gw, jwks }
  }

  it('before authentication: no token + an owned nomination → 400, no key fetched', async () => {
    const { backend, gw, jwks } = await guarded()
    const res = await sendRaw(gw.port, [
      post(
        'app',
        [...toolHeaders('get_forecast'), ['Connection', 'Mcp-Name']],
        call('get_forecast', 40),
      ),
    ])
    expectRefused(res, backend)
    expect(jwks.hits).toBe(0)
  })

  it('after Origin: a foreign Origin + an owned nomination → 403 for the Origin', async () => {
    const { backend, gw } = await guarded()
    const res = await sendRaw(gw.port, [
      post(
        'app',
        [
          ...toolHeaders('get_forecast'),
          ['Origin', 'https://evil.example'],
          ['Connection', 'Mcp-Name'],
        ],
        call('get_forecast', 41),
      ),
    ])
    expect(res.status).toBe(403)
    expect(res.headers['x-mcp-gateway-error']).toBe('origin_not_allowed')
    expect(backend.requests).toHaveLength(0)
  })

  it('after the duplicate check: two Mcp-Name headers + an owned nomination → duplicate_header', async () => {
    const { backend, gw } = await recording()
    const res = await sendRaw(gw.port, [
      post(
        'app',
        [
          ...toolHeaders('get_forecast'),
          ['Mcp-Name', 'delete_station'],
          ['Connection', 'Mcp-Name'],
        ],
        call('get_forecast', 42),
      ),
    ])
    expect(res.status).toBe(400)
    expect(res.headers['x-mcp-gateway-error']).toBe('duplicate_header')
    expect(backend.requests).toHaveLength(0)
  })
})

describe('Connection naming any other header', () => {
  it('drops the nominated header and forwards the rest unchanged (recording backend)', async () => {
    const { backend, gw } = await recording({ trustHeaders: false })
    const res = await sendRaw(gw.port, [
      post(
        'app',
        [
          ...toolHeaders('get_forecast'),
          ['Connection', 'keep-alive, X-Foo, TE, Upgrade, Cookie'],
          ['X-Foo', '1'],
          ['X-Bar', '2'],
          ['TE', 'trailers'],
          ['Upgrade', 'h2c'],
          ['Cookie', 'a=b'],
        ],
        call('get_forecast', 20),
      ),
    ])
    expect(res.status, res.body).toBe(200)
    expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
    const [seen] = backend.requests
    expect(seen?.header('x-bar')).toBe('2')
    for (const h of ['x-foo', 'te', 'upgrade', 'cookie']) expect(seen?.header(h), h).toBeUndefined()
    // What the gateway judged arrives exactly as judged.
    expect(seen?.header('mcp-protocol-version')).toBe(MODERN_VERSION)
    expect(seen?.header('mcp-method')).toBe('tools/call')
    expect(seen?.header('mcp-name')).toBe('get_forecast')
  })

  it('an SDK server with trustHeaders serves the request; the judged headers reach it', async () => {
    const { backend, gw } = await sdkBehindDemoPolicy()
    const res = await sendRaw(gw.port, [
      post(
        'weather',
        [...toolHeaders('get_forecast'), ['Connection', 'x-foo'], ['X-Foo', '1']],
        call('get_forecast', 21),
      ),
    ])
    expect(res.status, res.body).toBe(200)
    expect(res.body).toContain('Oslo')
    const [seen] = backend.calls('tools/call')
    expect(seen?.header('x-foo')).toBeUndefined()
    expect(seen?.header('mcp-protocol-version')).toBe(MODERN_VERSION)
    expect(seen?.header('mcp-name')).toBe('get_forecast')
  })

  it('keep-alive and close alone change nothing', async () => {
    const { backend, gw } = await recording({ trustHeaders: true })
    for (const [i, value] of ['keep-alive', 'Keep-Alive', 'close'].entries()) {
      const res = await sendRaw(gw.port, [
        post(
          'app',
          [...toolHeaders('get_forecast'), ['Connection', value], ['X-Foo', '1']],
          call('get_forecast', 30 + i),
        ),
      ])
      expect(res.status, value).toBe(200)
      expect(backend.requests[i]?.header('x-foo'), value).toBe('1')
    }
  })
})
