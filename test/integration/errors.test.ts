import { describe, expect, it, onTestFinished } from 'vitest'
import {
  ERRORS,
  GatewayError,
  renderError,
  toGatewayError,
  type ErrorCode,
} from '../../src/errors.js'
import { mcpBody, mcpHeaders, rawPost, rawRequest, type RawResponse } from '../helpers/clients.js'
import { oneServer, startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { httpHead, sendRaw } from '../helpers/raw-socket.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'

/**
 * The error contract (issue 2 item 6): every reason in the error table, with its status, JSON-RPC
 * code and the request's id where it can be read — and, for every rejection, a backend that saw
 * nothing.
 */

async function backend(
  opts: Parameters<typeof startNonValidatingBackend>[0] = {},
): Promise<NonValidatingBackend> {
  const b = await startNonValidatingBackend(opts)
  onTestFinished(() => b.close())
  return b
}

function expectGatewayError(res: RawResponse, code: ErrorCode, id: unknown): void {
  const spec = ERRORS[code]
  expect(res.status, res.text).toBe(spec.status)
  expect(res.headers['x-mcp-gateway-error']).toBe(code)
  expect(res.headers['content-type']).toBe('application/json')
  const body = res.json() as {
    jsonrpc: string
    id: unknown
    error: { code: number; data: { source: string; reason: string } }
  }
  expect(body.jsonrpc).toBe('2.0')
  expect(body.id).toEqual(id)
  expect(body.error.code).toBe(spec.rpc)
  expect(body.error.data).toMatchObject({ source: 'gateway', reason: code })
}

const call = (id: string | number = 7, name = 'echo') =>
  mcpBody('tools/call', { name, arguments: {} }, id)
const headers = (name = 'echo') => mcpHeaders('tools/call', name)

describe('front-door rejections never reach the backend', () => {
  let b: NonValidatingBackend
  let gw: TestGateway

  async function setup(extra: Record<string, unknown> = {}, server: Record<string, unknown> = {}) {
    b = await backend()
    gw = await startTestGateway({ ...oneServer(b.url, server), ...extra })
  }

  it('method_not_allowed: GET without a 2025 session gets 405 with Allow: POST', async () => {
    await setup()
    const res = await rawRequest('GET', gw.mcpUrl('app'), {
      headers: { accept: 'text/event-stream' },
    })
    expectGatewayError(res, 'method_not_allowed', null)
    expect(res.headers.allow).toBe('POST')
    const del = await rawRequest('DELETE', gw.mcpUrl('app'))
    expect(del.status).toBe(405)
    const put = await rawRequest('PUT', gw.mcpUrl('app'), { body: call(), headers: headers() })
    expect(put.status).toBe(405)
    expect(b.requests).toHaveLength(0)
  })

  it('unknown_server: 404 for a server that is not configured, and for other paths', async () => {
    await setup()
    expectGatewayError(
      await rawPost(`${gw.url}/mcp/nope`, call(), headers()),
      'unknown_server',
      null,
    )
    expect((await rawPost(`${gw.url}/other`, call(), headers())).status).toBe(404)
    expect(b.requests).toHaveLength(0)
  })

  it('origin_not_allowed: a present Origin that is not allowed gets 403 without an id', async () => {
    await setup({ origins: ['https://app.example'] })
    const bad = await rawPost(gw.mcpUrl('app'), call(), {
      ...headers(),
      origin: 'https://evil.example',
    })
    expectGatewayError(bad, 'origin_not_allowed', null)
    expect(bad.headers['access-control-allow-origin']).toBeUndefined()
    expect((await rawPost(gw.mcpUrl('app'), call(), { ...headers(), origin: 'null' })).status).toBe(
      403,
    )
    expect(b.requests).toHaveLength(0)
    expect(
      (await rawPost(gw.mcpUrl('app'), call(), { ...headers(), origin: 'https://app.example' }))
        .status,
    ).toBe(200)
    expect((await rawPost(gw.mcpUrl('app'), call(), headers())).status).toBe(200) // no Origin: non-browser
  })

  it('host_not_allowed: Host outside allowedHosts (DNS rebinding) gets 403', async () => {
    await setup({ allowedHosts: ['gw.internal'] })
    const res = await rawPost(gw.mcpUrl('app'), call(), { ...headers(), host: 'attacker.example' })
    expectGatewayError(res, 'host_not_allowed', null)
    expect(b.requests).toHaveLength(0)
  })

  it('too_many_headers: more than limits.maxHeaderCount headers get 431', async () => {
    await setup({ limits: { maxHeaderCount: 20 } })
    const many = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`x-h${i}`, 'v']))
    expectGatewayError(
      await rawPost(gw.mcpUrl('app'), call(), { ...headers(), ...many }),
      'too_many_headers',
      null,
    )
    expect(b.requests).toHaveLength(0)
  })

  it('duplicate_header: two Mcp-Name headers are refused', async () => {
    await setup({}, { trustHeaders: true })
    const body = JSON.stringify(call())
    const res = await sendRaw(gw.port, [
      httpHead('POST', '/mcp/app', [
        ['host', 'x'],
        ['content-type', 'application/json'],
        ['mcp-protocol-version', '2026-07-28'],
        ['mcp-method', 'tools/call'],
        ['mcp-name', 'echo'],
        ['mcp-name', 'delete_all'],
        ['content-length', String(Buffer.byteLength(body))],
      ]) + body,
    ])
    expect(res.status).toBe(400)
    expect(JSON.parse(res.body)).toMatchObject({
      error: { code: -32600, data: { reason: 'duplicate_header' } },
    })
    expect(b.requests).toHaveLength(0)
  })

  it('body_too_large: a declared Content-Length over the cap is refused before reading; a chunked body is cut off', async () => {
    await setup({ limits: { maxBodyBytes: 1000 } })
    const declared = await sendRaw(gw.port, [
      httpHead('POST', '/mcp/app', [
        ['host', 'x'],
        ['content-type', 'application/json'],
        ['content-length', '10737418240'],
      ]),
    ])
    expect(declared.status).toBe(413)
    expect(JSON.parse(declared.body)).toMatchObject({
      id: null,
      error: { code: -31013, data: { reason: 'body_too_large' } },
    })
    expect(declared.headers.connection).toBe('close')
    const chunk = 'x'.repeat(600)
    const chunked = await sendRaw(
      gw.port,
      [
        httpHead('POST', '/mcp/app', [
          ['host', 'x'],
          ['content-type', 'application/json'],
          ['transfer-encoding', 'chunked'],
        ]),
        `258\r\n${chunk}\r\n`,
        `258\r\n${chunk}\r\n`,
        `258\r\n${chunk}\r\n`,
      ],
      { delayMs: 20 },
    )
    expect(chunked.status).toBe(413)
    expect(b.requests).toHaveLength(0)
  })

  it('body_timeout: a body that stalls gets 408 at the deadline', async () => {
    await setup({ limits: { bodyTimeoutMs: 300 } })
    const res = await sendRaw(gw.port, [
      httpHead('POST', '/mcp/app', [
        ['host', 'x'],
        ['content-type', 'application/json'],
        ['content-length', '100'],
      ]) + '{"jsonrpc":',
    ])
    expect(res.status).toBe(408)
    expect(JSON.parse(res.body)).toMatchObject({
      error: { code: -31008, data: { reason: 'body_timeout' } },
    })
    expect(b.requests).toHaveLength(0)
  })

  it('unsupported_media_type and content_encoding: 415', async () => {
    await setup()
    expectGatewayError(
      await rawPost(gw.mcpUrl('app'), call(), { ...headers(), 'content-type': 'text/plain' }),
      'unsupported_media_type',
      null,
    )
    expectGatewayError(
      await rawPost(gw.mcpUrl('app'), call(), { ...headers(), 'content-encoding': 'gzip' }),
      'content_encoding',
      null,
    )
    expect(b.requests).toHaveLength(0)
  })
})

describe('message and SEP-2243 rejections echo the id and never reach the backend', () => {
  let b: NonValidatingBackend
  let gw: TestGateway
  async function setup(server: Record<string, unknown> = {}) {
    b = await backend()
    gw = await startTestGateway(oneServer(b.url, server))
  }
  const post = (body: string | object, h: Record<string, string> = headers()) =>
    rawPost(gw.mcpUrl('app'), body, h)

  it.each([
    ['parse_error', '{"jsonrpc":', null],
    [
      'invalid_request',
      '{"jsonrpc":"1.0","id":5,"method":"tools/call","params":{"name":"echo"}}',
      5,
    ],
    [
      'invalid_id',
      '{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}',
      null,
    ],
    [
      'invalid_id',
      '{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo"}}',
      null,
    ],
    [
      'case_variant_key',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"Name":"echo"}}',
      4,
    ],
    [
      'prototype_key',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","__proto__":{}}}',
      4,
    ],
    [
      'batch_not_supported',
      '[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]',
      null,
    ],
    [
      'duplicate_key',
      '{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"echo","name":"delete_all"}}',
      'abc',
    ],
    [
      'json_too_deep',
      `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":${'['.repeat(100)}${']'.repeat(100)}}}`,
      9,
    ],
  ] as const)('%s for %s', async (code, body, id) => {
    await setup()
    expectGatewayError(await post(body), code, id)
    expect(b.requests).toHaveLength(0)
  })

  it('header_mismatch: echoes a big integer id byte for byte', async () => {
    await setup()
    const body = JSON.stringify(call(1)).replace('"id":1', '"id":12345678901234567890')
    const res = await post(body, headers('read_file'))
    expect(res.status).toBe(400)
    expect(res.text).toContain('"id":12345678901234567890,')
    expect(res.text).toContain('"code":-32020')
    expect(b.requests).toHaveLength(0)
  })

  it('header_mismatch: a 2026-07-28 request missing Mcp-Method or Mcp-Name', async () => {
    await setup({ trustHeaders: true })
    const { 'mcp-method': _m, ...noMethod } = headers()
    expectGatewayError(await post(call(3), noMethod), 'header_mismatch', 3)
    const { 'mcp-name': _n, ...noName } = headers()
    expectGatewayError(await post(call(4), noName), 'header_mismatch', 4)
    expect(b.requests).toHaveLength(0)
  })

  it('invalid_params: a 2025-era tools/call without params.name', async () => {
    await setup()
    const res = await post(
      { jsonrpc: '2.0', id: 11, method: 'tools/call', params: {} },
      { 'content-type': 'application/json' },
    )
    expectGatewayError(res, 'invalid_params', 11)
    expect(b.requests).toHaveLength(0)
  })

  it('unsupported_version: lists the supported versions', async () => {
    await setup()
    const res = await post(call(2), { ...headers(), 'mcp-protocol-version': '2099-01-01' })
    expectGatewayError(res, 'unsupported_version', 2)
    expect((res.json() as { error: { data: unknown } }).error.data).toMatchObject({
      supported: expect.arrayContaining(['2026-07-28']),
      requested: '2099-01-01',
    })
    expect(b.requests).toHaveLength(0)
  })

  it('legacy_not_allowed: a 2025-era client on a modern-only server', async () => {
    await setup({ legacyClients: 'reject' })
    const res = await post(
      { jsonrpc: '2.0', id: 6, method: 'initialize', params: {} },
      { 'content-type': 'application/json' },
    )
    expectGatewayError(res, 'legacy_not_allowed', 6)
    expect(b.requests).toHaveLength(0)
  })
})

describe('upstream failures are gateway errors, distinguishable from the backend', () => {
  it('no_upstream: nothing listens at the upstream, so nothing could take the request (503)', async () => {
    const b = await startNonValidatingBackend()
    const url = b.url
    await b.close()
    const gw = await startTestGateway(oneServer(url))
    const res = await rawPost(gw.mcpUrl('app'), call(21), headers())
    expectGatewayError(res, 'no_upstream', 21)
    expect(res.headers['retry-after']).toBe('1')
  })

  it('upstream_unavailable: the upstream reset the connection after it got the call', async () => {
    const b = await backend({ behaviour: () => 'reset' })
    const gw = await startTestGateway(oneServer(b.url))
    expectGatewayError(
      await rawPost(gw.mcpUrl('app'), call(26), headers()),
      'upstream_unavailable',
      26,
    )
    expect(b.requests).toHaveLength(1)
  })

  it('upstream_bad_response: garbage, or a 401 for the gateway credentials (challenge not relayed)', async () => {
    const b = await backend({ behaviour: () => 'garbage' })
    const gw = await startTestGateway(oneServer(b.url))
    expectGatewayError(
      await rawPost(gw.mcpUrl('app'), call(22), headers()),
      'upstream_bad_response',
      22,
    )
    b.setBehaviour(() => ({
      status: 401,
      headers: { 'www-authenticate': 'Bearer resource_metadata="https://other-as/x"' },
      body: '',
    }))
    const res = await rawPost(gw.mcpUrl('app'), call(23), headers())
    expectGatewayError(res, 'upstream_bad_response', 23)
    expect(res.headers['www-authenticate']).toBeUndefined()
  })

  it('upstream_timeout: no response headers within responseHeadersMs', async () => {
    const b = await backend({ behaviour: () => 'hang' })
    const gw = await startTestGateway(oneServer(b.url, { timeouts: { responseHeadersMs: 300 } }))
    expectGatewayError(await rawPost(gw.mcpUrl('app'), call(24), headers()), 'upstream_timeout', 24)
  })

  it('overloaded: past maxInFlight the gateway answers 503 with Retry-After at once', async () => {
    const b = await backend({
      behaviour: (_r, body) => ((body as { id?: number }).id === 1 ? { delayMs: 1500 } : 'normal'),
    })
    const gw = await startTestGateway(oneServer(b.url, { maxInFlight: 1 }))
    const slow = rawPost(gw.mcpUrl('app'), call(1), headers())
    await expect.poll(() => b.requests.length).toBeGreaterThan(0) // the slow call holds the slot
    const res = await rawPost(gw.mcpUrl('app'), call(25), headers())
    expectGatewayError(res, 'overloaded', 25)
    expect(res.headers['retry-after']).toBe('1')
    expect((await slow).status).toBe(200)
    expect(b.requests).toHaveLength(1)
  })

  it('shutting_down: a draining gateway refuses new requests with 503', async () => {
    const b = await backend()
    const gw = await startTestGateway(oneServer(b.url))
    void gw.ref.lifecycle.drain(0) // the test's own close() drains again
    // Shedding happens before the body is read, so there is no id to echo.
    expectGatewayError(await rawPost(gw.mcpUrl('app'), call(26), headers()), 'shutting_down', null)
    const ready = await rawRequest('GET', `${gw.url}/readyz`)
    expect(ready.status).toBe(503)
    expect(b.requests).toHaveLength(0)
  })

  it('relays a backend JSON-RPC error unchanged, without the gateway markers', async () => {
    const body = '{"jsonrpc":"2.0","id":27,"error":{"code":-32602,"message":"Tool nope not found"}}'
    const b = await backend({
      behaviour: () => ({ status: 200, headers: { 'content-type': 'application/json' }, body }),
    })
    const gw = await startTestGateway(oneServer(b.url))
    const res = await rawPost(gw.mcpUrl('app'), call(27), headers())
    expect(res.status).toBe(200)
    expect(res.text).toBe(body)
    expect(res.headers['x-mcp-gateway-error']).toBeUndefined()
  })
})

describe('the error table', () => {
  it('turns anything unexpected into internal (500), keeping the cause', () => {
    const cause = new TypeError('boom')
    const err = toGatewayError(cause)
    expect(err.code).toBe('internal')
    expect(err.cause).toBe(cause)
    const r = renderError(err, '"x"')
    expect(r.status).toBe(500)
    expect(JSON.parse(r.body)).toEqual({
      jsonrpc: '2.0',
      id: 'x',
      error: {
        code: -31500,
        message: 'Internal gateway error',
        data: { source: 'gateway', reason: 'internal' },
      },
    })
  })

  it('uses spec codes where the spec defines one and application codes outside -32768..-32000 otherwise', () => {
    // -32021 MissingRequiredClientCapability (2026-07-28), -32042 URLElicitationRequired (2025-11-25).
    const spec = new Set([-32700, -32600, -32601, -32602, -32020, -32021, -32022, -32042, -32001])
    for (const [code, e] of Object.entries(ERRORS)) {
      if (!spec.has(e.rpc)) expect(e.rpc > -32000 || e.rpc < -32768, code).toBe(true)
      expect(renderError(new GatewayError(code as ErrorCode), undefined).status).toBe(e.status)
    }
  })
})
