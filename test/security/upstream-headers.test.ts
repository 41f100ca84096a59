import type { IncomingMessage } from 'node:http'
import { describe, expect, it, onTestFinished } from 'vitest'
import { ConfigError, parseConfigText } from '../../src/runtime/load.js'
import { mcpBody, MODERN_VERSION } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { httpHead, sendRaw, type RawSocketResponse } from '../helpers/raw-socket.js'
import { startNonValidatingBackend, type RecordedRequest } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  closeServer,
  generateTestKey,
  listenOn,
  mintToken,
  startJwks,
} from '../helpers/tokens.js'

/**
 * What the gateway sets upstream replaces whatever the client sent under the same name, compared
 * case-insensitively: configured `servers.<name>.headers`, the token-exchange `Authorization` and
 * the identity headers. Appending would let a client pre-empt the gateway's value (a backend reads
 * `x-api-key: attacker, gateway-secret`, or the first copy). The headers the gateway judged reach
 * the backend exactly once, exactly as judged.
 */

type Header = readonly [string, string]

/** Every value of header `name` the backend received, matched case-insensitively, in order. */
function valuesOf(req: RecordedRequest | undefined, name: string): string[] {
  const raw = req?.rawHeaders ?? []
  const out: string[] = []
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() === name) out.push(raw[i + 1] as string)
  }
  return out
}

/** A complete 2026-07-28 tools/call POST to /mcp/<server> with `extra` headers. */
function toolCall(server: string, extra: readonly Header[], id = 1): string {
  const body = JSON.stringify(mcpBody('tools/call', { name: 'echo', arguments: {} }, id))
  return (
    httpHead('POST', `/mcp/${server}`, [
      ['Host', 'gw.test'],
      ['Content-Type', 'application/json'],
      ['Accept', 'application/json, text/event-stream'],
      ['MCP-Protocol-Version', MODERN_VERSION],
      ['Mcp-Method', 'tools/call'],
      ['Mcp-Name', 'echo'],
      ...extra,
      ['Content-Length', String(Buffer.byteLength(body))],
    ]) + body
  )
}

async function keyedGateway() {
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway(
    oneServer(backend.url, { headers: { 'X-Api-Key': 'gateway-secret' } }),
  )
  return { backend, gw }
}

describe('a configured upstream header replaces every client copy', () => {
  it.each<[string, Header[]]>([
    ['the same case', [['X-Api-Key', 'attacker']]],
    ['lower case', [['x-api-key', 'attacker']]],
    ['upper case', [['X-API-KEY', 'attacker']]],
    [
      'two copies in two cases',
      [
        ['X-API-KEY', 'attacker-1'],
        ['x-api-key', 'attacker-2'],
      ],
    ],
    ['an empty copy', [['x-api-key', '']]],
    ['an underscore twin (CGI reads it as the same header)', [['X_Api_Key', 'attacker']]],
  ])('client sends %s → the backend sees exactly the configured value', async (_label, sent) => {
    const { backend, gw } = await keyedGateway()
    const res = await sendRaw(gw.port, [toolCall('app', sent)])
    expect(res.status, res.body).toBe(200)
    expect(valuesOf(backend.requests[0], 'x-api-key')).toEqual(['gateway-secret'])
    expect(valuesOf(backend.requests[0], 'x_api_key')).toEqual([])
  })

  it('a server without that header forwards the client copy untouched', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway(oneServer(backend.url))
    expect((await sendRaw(gw.port, [toolCall('app', [['X-Api-Key', 'client']])])).status).toBe(200)
    expect(valuesOf(backend.requests[0], 'x-api-key')).toEqual(['client'])
  })
})

describe('identity headers are the gateway’s own', () => {
  it('client Forwarded, X-Forwarded-* and X-Real-IP never reach the backend', async () => {
    const { backend, gw } = await keyedGateway()
    const res = await sendRaw(gw.port, [
      toolCall('app', [
        ['X-Forwarded-For', '10.9.9.9'],
        ['x-forwarded-for', '10.8.8.8'],
        ['Forwarded', 'for=10.9.9.9;proto=https'],
        ['X-Forwarded-Proto', 'https'],
        ['X-Forwarded-Host', 'evil.example'],
        ['X-Forwarded-Prefix', '/admin'],
        ['X-Forwarded-Port', '443'],
        ['X-Real-IP', '10.9.9.9'],
        ['X_Forwarded_For', '10.7.7.7'],
      ]),
    ])
    expect(res.status, res.body).toBe(200)
    const [seen] = backend.requests
    expect(valuesOf(seen, 'x-forwarded-for')).toEqual(['127.0.0.1'])
    expect(valuesOf(seen, 'x-forwarded-proto')).toEqual(['http'])
    expect(valuesOf(seen, 'x-forwarded-host')).toEqual(['gw.test'])
    for (const h of [
      'forwarded',
      'x-forwarded-prefix',
      'x-forwarded-port',
      'x-real-ip',
      'x_forwarded_for',
    ]) {
      expect(valuesOf(seen, h), h).toEqual([])
    }
  })

  it('the headers the gateway judged arrive once, byte for byte, without underscore twins', async () => {
    const { backend, gw } = await keyedGateway()
    const res = await sendRaw(gw.port, [
      toolCall('app', [
        ['Mcp-Param-Region', '=?base64?w7xi?='],
        ['Mcp_Method', 'tools/list'],
        ['MCP_PROTOCOL_VERSION', '2025-11-25'],
      ]),
    ])
    expect(res.status, res.body).toBe(200)
    const [seen] = backend.requests
    expect(valuesOf(seen, 'mcp-protocol-version')).toEqual([MODERN_VERSION])
    expect(valuesOf(seen, 'mcp-method')).toEqual(['tools/call'])
    expect(valuesOf(seen, 'mcp-name')).toEqual(['echo'])
    expect(valuesOf(seen, 'mcp-param-region')).toEqual(['=?base64?w7xi?='])
    expect(valuesOf(seen, 'mcp_method')).toEqual([])
    expect(valuesOf(seen, 'mcp_protocol_version')).toEqual([])
  })
})

describe('the token-exchange Authorization replaces the caller’s', () => {
  const ISS = 'https://idp.example.com'
  const PUBLIC = 'https://mcp.example.com'

  async function exchangeRig() {
    const key = await generateTestKey('ES256')
    const jwks = await startJwks([key])
    onTestFinished(() => jwks.close())
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    let exchanges = 0
    const endpoint = await listenOn((req: IncomingMessage, res) => {
      void (async () => {
        for await (const _ of req) void _
        exchanges++
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            access_token: 'exchanged-for-backend',
            issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
            token_type: 'Bearer',
            expires_in: 300,
          }),
        )
      })()
    })
    onTestFinished(() => closeServer(endpoint.server))
    const gw = await startTestGateway({
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      servers: {
        app: {
          upstreams: [{ url: backend.url }],
          tokenExchange: { tokenUrl: `${endpoint.url}/token`, clientId: 'edge', clientSecret: 's' },
        },
      },
    })
    const token = await mintToken(claimsFor(ISS, `${PUBLIC}/mcp/app`), { key })
    return { backend, gw, token, exchanges: () => exchanges }
  }

  it.each(['Authorization', 'authorization', 'AUTHORIZATION'])(
    'caller sends %s → the backend sees exactly the exchanged token',
    async (name) => {
      const { backend, gw, token } = await exchangeRig()
      const res = await sendRaw(gw.port, [toolCall('app', [[name, `Bearer ${token}`]])])
      expect(res.status, res.body).toBe(200)
      const [seen] = backend.requests
      expect(valuesOf(seen, 'authorization')).toEqual(['Bearer exchanged-for-backend'])
      expect(seen?.rawHeaders.join('\n')).not.toContain(token)
    },
  )

  it('two caller Authorization headers → 400 duplicate_header, no exchange, nothing forwarded', async () => {
    const { backend, gw, token, exchanges } = await exchangeRig()
    const res: RawSocketResponse = await sendRaw(gw.port, [
      toolCall('app', [
        ['Authorization', `Bearer ${token}`],
        ['authorization', 'Bearer attacker'],
      ]),
    ])
    expect(res.status).toBe(400)
    expect(res.headers['x-mcp-gateway-error']).toBe('duplicate_header')
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { code: -32600 } })
    expect(exchanges()).toBe(0)
    expect(backend.requests).toHaveLength(0)
  })
})

describe('configured header names', () => {
  const load = (headers: Record<string, string>) =>
    parseConfigText(
      JSON.stringify({
        servers: { app: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }], headers } },
      }),
      { dir: process.cwd(), env: {} },
    )

  it.each([
    'MCP-Protocol-Version',
    'Mcp-Method',
    'mcp-name',
    'Mcp-Param-Region',
    'Mcp-Session-Id',
    'Host',
    'Content-Length',
    'Content-Type',
    'Transfer-Encoding',
    'Connection',
    'X-Forwarded-For',
    'X-Forwarded-Proto',
    'X-Forwarded-Host',
  ])('%s, which the gateway judges or sets, is refused at load', (name) => {
    expect(() => load({ [name]: 'v' })).toThrow(ConfigError)
    expect(() => load({ [name]: 'v' })).toThrow(
      `servers.app.headers.${name}: the gateway owns this header`,
    )
  })

  it('one name in two cases is refused: it would be sent twice', () => {
    expect(() => load({ 'X-Api-Key': 'a', 'x-api-key': 'b' })).toThrow(
      'servers.app.headers.x-api-key: set twice',
    )
  })

  it('ordinary names, static credentials included, load', () => {
    expect(
      load({ 'X-Api-Key': 'k', Authorization: 'Bearer t', 'X-Forwarded-Prefix': '/w' }).config
        .servers['app']?.headers,
    ).toEqual({ 'X-Api-Key': 'k', Authorization: 'Bearer t', 'X-Forwarded-Prefix': '/w' })
  })
})
