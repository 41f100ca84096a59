import type { IncomingMessage, ServerResponse } from 'node:http'
import { describe, expect, it, onTestFinished } from 'vitest'
import { MAX_JWKS_BYTES } from '../../src/auth/remote-jwks.js'
import type { RunningGateway } from '../../src/server.js'
import { mcpPost, type RawResponse } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  closeServer,
  generateTestKey,
  HUGE_BYTES,
  listenOn,
  mintToken,
  startJwks,
  startTrap,
  streamHuge,
  type JwksMode,
  type JwksServer,
  type TestKey,
} from '../helpers/tokens.js'

/**
 * Documents the gateway fetches from an identity provider (the JWK Set, token-exchange answers)
 * are bounded in size and time and never followed through a redirect (docs/auth.md, Key fetching
 * and Token exchange). A 256 MiB JWK Set once took the gateway to 1.6 GB.
 */

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/weather`
const TIMEOUT_MS = 300
/** For the size tests: long enough that only the byte cap can end the read early. */
const SLOW_TIMEOUT_MS = 20_000
/** Loopback socket buffers on both sides hold a few MiB the reader never asked for. */
const SOCKET_SLACK = 24 * 1024 * 1024

function callTool(gw: RunningGateway, bearer: string): Promise<RawResponse> {
  return mcpPost(
    `${gw.url}/mcp/weather`,
    'tools/call',
    { name: 'echo', arguments: {} },
    { auth: bearer, id: 'call-7' },
  )
}

/** Highest RSS seen while `work` runs (sampled every 5 ms), minus the RSS before it. */
async function rssGrowth<T>(work: () => Promise<T>): Promise<{ value: T; growth: number }> {
  const before = process.memoryUsage().rss
  let peak = before
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5)
  try {
    const value = await work()
    peak = Math.max(peak, process.memoryUsage().rss)
    return { value, growth: peak - before }
  } finally {
    clearInterval(timer)
  }
}

interface JwksRig {
  readonly gw: RunningGateway
  readonly jwks: JwksServer
  readonly backend: NonValidatingBackend
  readonly valid: string
}

async function jwksRig(mode: JwksMode, timeoutMs = TIMEOUT_MS): Promise<JwksRig> {
  const key = await generateTestKey('ES256')
  const jwks = await startJwks([key])
  onTestFinished(() => jwks.close())
  jwks.setMode(mode)
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway({
    auth: {
      publicUrl: PUBLIC,
      jwt: { issuer: ISS, jwksUrl: jwks.url, jwksCooldownMs: 0, jwksTimeoutMs: timeoutMs },
    },
    servers: { weather: { upstreams: [{ url: backend.url }] } },
  })
  const valid = await mintToken(claimsFor(ISS, AUD), { key })
  return { gw, jwks, backend, valid }
}

/** 503 auth_unavailable with Retry-After and no challenge: the gateway, not the token, failed. */
function expectUnavailable(res: RawResponse, backend: NonValidatingBackend): void {
  expect(res.status).toBe(503)
  expect(res.headers['x-mcp-gateway-error']).toBe('auth_unavailable')
  expect(res.headers['retry-after']).toMatch(/^[1-9]\d*$/)
  expect(res.headers['www-authenticate']).toBeUndefined()
  // Authentication runs before the body is read, so there is no id to echo.
  expect(res.response()).toMatchObject({
    id: null,
    error: { code: -31503, data: { source: 'gateway' } },
  })
  expect(backend.requests.length).toBe(0)
}

describe('JWKS fetch bounds', () => {
  it.each(['huge', 'huge-declared'] as const)(
    'abandons a 256 MiB JWK Set (%s) after the cap: 503, bounded bytes and memory',
    async (mode) => {
      const { gw, jwks, backend, valid } = await jwksRig(mode, SLOW_TIMEOUT_MS)
      const started = performance.now()
      const { value: res, growth } = await rssGrowth(() => callTool(gw, valid))
      expect(performance.now() - started).toBeLessThan(SLOW_TIMEOUT_MS / 4)
      expectUnavailable(res, backend)
      await expect.poll(() => jwks.abandoned).toBe(1)
      expect(jwks.hits).toBe(1)
      // The server got rid of a few MiB into socket buffers at most, nowhere near 256 MiB.
      expect(jwks.bytesSent).toBeLessThan(MAX_JWKS_BYTES + SOCKET_SLACK)
      expect(jwks.bytesSent).toBeLessThan(HUGE_BYTES / 8)
      expect(growth).toBeLessThan(64 * 1024 * 1024)
    },
  )

  it.each(['hang', 'stall-body'] as const)(
    'answers 503 within jwksTimeoutMs when the endpoint %s',
    async (mode) => {
      const { gw, jwks, backend, valid } = await jwksRig(mode)
      const started = performance.now()
      const res = await callTool(gw, valid)
      const elapsed = performance.now() - started
      expectUnavailable(res, backend)
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50)
      expect(elapsed).toBeLessThan(TIMEOUT_MS + 1500)
      await expect.poll(() => jwks.abandoned).toBe(1)
    },
  )

  it('treats a 302 as a failure and never requests its target', async () => {
    const { gw, jwks, backend, valid } = await jwksRig('redirect')
    const trap = await startTrap()
    onTestFinished(() => trap.close())
    jwks.redirectTo(trap.url)
    expectUnavailable(await callTool(gw, valid), backend)
    jwks.redirectTo('/elsewhere.json')
    expectUnavailable(await callTool(gw, valid), backend)
    expect(jwks.paths).toEqual(['/jwks.json', '/jwks.json'])
    expect(trap.hits).toBe(0)
  })

  it('still accepts a JWK Set just under the cap', async () => {
    const { gw, jwks, backend } = await jwksRig('ok')
    const key = await generateTestKey('ES256')
    // Pad with extra member fields until the document is close to the cap.
    const filler = 'x'.repeat(MAX_JWKS_BYTES - 2048)
    jwks.setKeys([{ ...key, jwk: { ...key.jwk, x5u_note: filler } } as TestKey])
    const token = await mintToken(claimsFor(ISS, AUD), { key })
    expect((await callTool(gw, token)).status).toBe(200)
    expect(backend.requests.length).toBe(1)
  })
})

type EndpointMode = 'huge' | 'huge-declared' | 'hang' | 'stall-body' | 'redirect'

interface TokenEndpoint {
  readonly url: string
  mode: EndpointMode
  redirectTo: string
  hits: number
  bytesSent: number
  abandoned: number
}

async function startTokenEndpoint(): Promise<TokenEndpoint> {
  const state: TokenEndpoint = {
    url: '',
    mode: 'hang',
    redirectTo: '',
    hits: 0,
    bytesSent: 0,
    abandoned: 0,
  }
  const { server, url } = await listenOn((req: IncomingMessage, res: ServerResponse) => {
    state.hits++
    res.on('close', () => void (res.writableFinished || state.abandoned++))
    req.resume()
    const json = { 'content-type': 'application/json' }
    if (state.mode === 'hang') return
    if (state.mode === 'redirect') {
      // 307 keeps method and body: following it would post the secret and the caller's token.
      return void res.writeHead(307, { location: state.redirectTo }).end()
    }
    if (state.mode === 'stall-body') return void res.writeHead(200, json).write('{"access_')
    const length = state.mode === 'huge-declared' ? { 'content-length': String(HUGE_BYTES) } : {}
    res.writeHead(200, { ...json, ...length })
    streamHuge(res, '{"token_type":"Bearer","expires_in":300,"access_token":"a"', (n) => {
      state.bytesSent += n
    })
  })
  onTestFinished(() => closeServer(server))
  return Object.assign(state, { url: `${url}/token` })
}

interface ExchangeRig {
  readonly gw: RunningGateway
  readonly backend: NonValidatingBackend
  readonly endpoint: TokenEndpoint
  readonly key: TestKey
}

async function exchangeRig(mode: EndpointMode, timeoutMs = TIMEOUT_MS): Promise<ExchangeRig> {
  const key = await generateTestKey('ES256')
  const jwks = await startJwks([key])
  onTestFinished(() => jwks.close())
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const endpoint = await startTokenEndpoint()
  endpoint.mode = mode
  const gw = await startTestGateway({
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
    servers: {
      weather: {
        upstreams: [{ url: backend.url }],
        tokenExchange: {
          tokenUrl: endpoint.url,
          clientId: 'mcp-edge',
          clientSecret: 'gateway-secret',
          timeoutMs,
        },
      },
    },
  })
  return { gw, backend, endpoint, key }
}

function expectExchangeFailed(res: RawResponse, backend: NonValidatingBackend): void {
  expect(res.status).toBe(502)
  expect(res.headers['x-mcp-gateway-error']).toBe('token_exchange_failed')
  expect(res.response()).toMatchObject({
    id: 'call-7',
    error: { code: -31502, data: { source: 'gateway' } },
  })
  expect(backend.requests.length).toBe(0)
}

describe('token endpoint fetch bounds', () => {
  it.each(['huge', 'huge-declared'] as const)(
    'abandons a 256 MiB token answer (%s): 502 token_exchange_failed, nothing forwarded',
    async (mode) => {
      const { gw, backend, endpoint, key } = await exchangeRig(mode, SLOW_TIMEOUT_MS)
      const caller = await mintToken(claimsFor(ISS, AUD), { key })
      const started = performance.now()
      const { value: res, growth } = await rssGrowth(() => callTool(gw, caller))
      expect(performance.now() - started).toBeLessThan(SLOW_TIMEOUT_MS / 4)
      expectExchangeFailed(res, backend)
      await expect.poll(() => endpoint.abandoned).toBe(1)
      expect(endpoint.hits).toBe(1)
      expect(endpoint.bytesSent).toBeLessThan(HUGE_BYTES / 8)
      expect(growth).toBeLessThan(64 * 1024 * 1024)
    },
  )

  it.each(['hang', 'stall-body'] as const)(
    'answers 502 within timeoutMs when the token endpoint %s',
    async (mode) => {
      const { gw, backend, endpoint, key } = await exchangeRig(mode)
      const caller = await mintToken(claimsFor(ISS, AUD), { key })
      const started = performance.now()
      const res = await callTool(gw, caller)
      const elapsed = performance.now() - started
      expectExchangeFailed(res, backend)
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50)
      expect(elapsed).toBeLessThan(TIMEOUT_MS + 1500)
      await expect.poll(() => endpoint.abandoned).toBe(1)
    },
  )

  it('treats a 307 as a failure: the secret and the caller token go nowhere else', async () => {
    const { gw, backend, endpoint, key } = await exchangeRig('redirect')
    const trap = await startTrap()
    onTestFinished(() => trap.close())
    endpoint.redirectTo = trap.url
    const res = await callTool(gw, await mintToken(claimsFor(ISS, AUD), { key }))
    expectExchangeFailed(res, backend)
    expect(endpoint.hits).toBe(1)
    expect(trap.hits).toBe(0)
  })
})
