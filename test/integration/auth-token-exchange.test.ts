import type { IncomingMessage } from 'node:http'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { RunningGateway } from '../../src/server.js'
import { startTestGateway } from '../helpers/gateway.js'
import { mcpPost, type RawResponse } from '../helpers/clients.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  closeServer,
  generateTestKey,
  listenOn,
  mintToken,
  mintedTokens,
  startJwks,
  type TestKey,
} from '../helpers/tokens.js'

/**
 * Upstream credentials by RFC 8693 token exchange. The backend gets a token the
 * authorization server issued for it; the caller's own token never leaves the gateway except to
 * the token endpoint, whose job is to take it.
 */

const ISS = 'https://idp.example.com'
const AUD = 'https://mcp.example.com/mcp/weather'

type Answer = 'ok' | 'fail' | 'echo' | 'not-bearer'

interface TokenEndpoint {
  readonly url: string
  /** Form bodies received, oldest first, with the Authorization header each carried. */
  readonly requests: { form: URLSearchParams; authorization: string | undefined }[]
  answer: Answer
  /** Milliseconds to wait before answering (to make concurrent exchanges overlap). */
  delayMs: number
}

async function startTokenEndpoint(): Promise<TokenEndpoint> {
  let issued = 0
  const state: TokenEndpoint = { url: '', requests: [], answer: 'ok', delayMs: 0 }
  const { server, url } = await listenOn((req: IncomingMessage, res) => {
    void (async () => {
      let body = ''
      for await (const chunk of req) body += String(chunk)
      const form = new URLSearchParams(body)
      state.requests.push({ form, authorization: req.headers.authorization })
      await new Promise((r) => setTimeout(r, state.delayMs))
      if (state.answer === 'fail') {
        return void res
          .writeHead(400, { 'content-type': 'application/json' })
          .end('{"error":"invalid_grant"}')
      }
      const token = state.answer === 'echo' ? form.get('subject_token') : `exchanged-${++issued}`
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          access_token: token,
          issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          token_type: state.answer === 'not-bearer' ? 'DPoP' : 'Bearer',
          expires_in: 300,
        }),
      )
    })()
  })
  onTestFinished(() => closeServer(server))
  return Object.assign(state, { url: `${url}/token` })
}

interface Rig {
  readonly gw: RunningGateway
  readonly backend: NonValidatingBackend
  readonly endpoint: TokenEndpoint
  readonly key: TestKey
}

async function startRig(): Promise<Rig> {
  const key = await generateTestKey('RS256')
  const jwks = await startJwks([key])
  onTestFinished(() => jwks.close())
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const endpoint = await startTokenEndpoint()
  const gw = await startTestGateway({
    auth: { publicUrl: 'https://mcp.example.com', jwt: { issuer: ISS, jwksUrl: jwks.url } },
    servers: {
      weather: {
        upstreams: [{ url: backend.url }],
        tokenExchange: {
          tokenUrl: endpoint.url,
          clientId: 'mcp-edge',
          clientSecret: 'se:cret',
          audience: 'weather-api',
          scope: 'forecast:read',
        },
      },
    },
  })
  return { gw, backend, endpoint, key }
}

const caller = (key: TestKey, sub: string): Promise<string> =>
  mintToken(claimsFor(ISS, AUD, { sub }), { key })

function callTool(gw: RunningGateway, bearer: string): Promise<RawResponse> {
  return mcpPost(
    `${gw.url}/mcp/weather`,
    'tools/call',
    { name: 'echo', arguments: {} },
    { auth: bearer },
  )
}

/** The Authorization values the backend received, in order. */
const upstreamAuth = (backend: NonValidatingBackend): (string | undefined)[] =>
  backend.requests.map((r) => r.header('authorization'))

function expectNoCallerToken(backend: NonValidatingBackend): void {
  for (const req of backend.requests) {
    const wire = `${req.url}\n${req.rawHeaders.join('\n')}\n${req.body.toString('utf8')}`
    for (const token of mintedTokens) expect(wire.includes(token)).toBe(false)
  }
}

describe('token exchange (RFC 8693)', () => {
  it('sends the backend an exchanged token, asking with the caller token and client credentials', async () => {
    const { gw, backend, endpoint, key } = await startRig()
    const alice = await caller(key, 'alice')
    expect((await callTool(gw, alice)).status).toBe(200)
    expect(upstreamAuth(backend)).toEqual(['Bearer exchanged-1'])
    const [sent] = endpoint.requests
    expect(Object.fromEntries(sent?.form ?? [])).toEqual({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: alice,
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      requested_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      audience: 'weather-api',
      scope: 'forecast:read',
    })
    // RFC 6749 §2.3.1: id and secret are form-encoded before Basic
    const basic = Buffer.from('mcp-edge:se%3Acret').toString('base64')
    expect(sent?.authorization).toBe(`Basic ${basic}`)
    expectNoCallerToken(backend)
  })

  it('reuses an exchanged token per caller and shares one exchange between concurrent calls', async () => {
    const { gw, backend, endpoint, key } = await startRig()
    const alice = await caller(key, 'alice')
    expect((await callTool(gw, alice)).status).toBe(200)
    expect((await callTool(gw, alice)).status).toBe(200)
    expect(endpoint.requests.length).toBe(1)
    endpoint.delayMs = 150
    const bob = await caller(key, 'bob')
    const results = await Promise.all(Array.from({ length: 5 }, () => callTool(gw, bob)))
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
    expect(endpoint.requests.length).toBe(2)
    expect(upstreamAuth(backend)).toEqual([
      'Bearer exchanged-1',
      'Bearer exchanged-1',
      ...Array(5).fill('Bearer exchanged-2'),
    ])
    expectNoCallerToken(backend)
  })

  it.each([
    ['refuses the exchange', 'fail'],
    ['echoes the caller token back', 'echo'],
    ['issues a non-Bearer token', 'not-bearer'],
  ] as const)(
    'answers 502 and forwards nothing when the token endpoint %s',
    async (_name, answer) => {
      const { gw, backend, endpoint, key } = await startRig()
      endpoint.answer = answer
      const res = await callTool(gw, await caller(key, 'carol'))
      expect(res.status).toBe(502)
      expect(res.headers['x-mcp-gateway-error']).toBe('token_exchange_failed')
      expect(res.response().error).toMatchObject({ code: -31502, data: { source: 'gateway' } })
      expect(backend.requests.length).toBe(0)
      // failures are not cached: the next call asks again
      endpoint.answer = 'ok'
      expect((await callTool(gw, await caller(key, 'carol'))).status).toBe(200)
      expect(endpoint.requests.length).toBe(2)
    },
  )

  it('does not exchange for a caller it refused', async () => {
    const { gw, backend, endpoint } = await startRig()
    const res = await callTool(gw, 'not.a.token')
    expect(res.status).toBe(401)
    expect(endpoint.requests.length).toBe(0)
    expect(backend.requests.length).toBe(0)
  })
})
