import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { RunningGateway } from '../../src/server.js'
import { startTestGateway } from '../helpers/gateway.js'
import { mcpPost, type RawResponse } from '../helpers/clients.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  mintedTokens,
  startJwks,
  startTrap,
  type JwksServer,
  type MintOptions,
  type TestKey,
  type TrapServer,
} from '../helpers/tokens.js'

/**
 * Every way a bearer token can be wrong gets a 401 with the
 * right challenge, and nothing reaches the backend (no token ever does).
 */

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/weather`
const PRM = `${PUBLIC}/.well-known/oauth-protected-resource/mcp/weather`
const CHALLENGE = {
  missing: `Bearer resource_metadata="${PRM}"`,
  invalid: `Bearer error="invalid_token", resource_metadata="${PRM}"`,
  query: `Bearer error="invalid_request", resource_metadata="${PRM}"`,
}

let rsa: TestKey
let ec: TestKey
let attacker: TestKey
let jwks: JwksServer
let trap: TrapServer
let backend: NonValidatingBackend
let gw: RunningGateway

beforeAll(async () => {
  ;[rsa, ec, attacker] = await Promise.all([
    generateTestKey('RS256'),
    generateTestKey('ES256'),
    generateTestKey('RS256', 'attacker'),
  ])
  jwks = await startJwks([rsa, ec])
  trap = await startTrap()
  backend = await startNonValidatingBackend()
  gw = await startTestGateway(
    {
      auth: {
        publicUrl: PUBLIC,
        // A long cooldown: no test in this file may cause a second JWKS fetch.
        jwt: {
          issuer: ISS,
          jwksUrl: jwks.url,
          algorithms: ['RS256', 'ES256'],
          jwksCooldownMs: 600_000,
        },
      },
      servers: {
        weather: { upstreams: [{ url: backend.url }] },
        other: { upstreams: [{ url: backend.url }] },
      },
    },
    { autoClose: false },
  )
  // Warm the key cache, so "no JWKS fetch" below means the token never made the gateway look.
  const warm = await call(await valid())
  expect(warm.status).toBe(200)
})

afterAll(async () => {
  await gw?.close(0)
  await Promise.all([backend?.close(), jwks?.close(), trap?.close()])
})

afterEach(() => assertNoTokenPassthrough(backend))

/** No recorded request carries a credential header or any minted token, anywhere. */
function assertNoTokenPassthrough(server: NonValidatingBackend): void {
  for (const req of server.requests) {
    expect(req.header('authorization')).toBeUndefined()
    expect(req.header('cookie')).toBeUndefined()
    const wire = `${req.url}\n${req.rawHeaders.join('\n')}\n${req.body.toString('utf8')}`
    for (const token of mintedTokens) expect(wire.includes(token)).toBe(false)
  }
}

const now = (): number => Math.floor(Date.now() / 1000)
const valid = (extra = {}, key = rsa): Promise<string> =>
  mintToken(claimsFor(ISS, AUD, extra), { key })

function call(
  token: string | undefined,
  path = '/mcp/weather',
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const auth = token === undefined ? {} : { authorization: `Bearer ${token}` }
  const params = { name: 'echo', arguments: {} }
  return mcpPost(`${gw.url}${path}`, 'tools/call', params, { headers: { ...auth, ...headers } })
}

interface Refused {
  readonly name: string
  /** The Authorization header to send (undefined: none), and an optional query string. */
  readonly request: () => Promise<{ authorization?: string; query?: string }>
  readonly challenge: keyof typeof CHALLENGE
  readonly reason: 'unauthenticated' | 'invalid_token' | 'token_in_query'
  /** JWKS fetches the request may cause: only an unknown kid, once per cooldown. */
  readonly fetches?: number
}

const bearer = async (token: Promise<string>) => ({ authorization: `Bearer ${await token}` })
/** A token that was sent and refused: 401 invalid_token. */
const invalid = (name: string, request: Refused['request']): Refused => ({
  name,
  request,
  challenge: 'invalid',
  reason: 'invalid_token',
})
const forged = (opts: Omit<MintOptions, 'key'> & { key?: TestKey }) =>
  bearer(mintToken(claimsFor(ISS, AUD), { key: rsa, ...opts }))

const REFUSED: readonly Refused[] = [
  {
    name: 'no Authorization header',
    request: async () => ({}),
    challenge: 'missing',
    reason: 'unauthenticated',
  },
  {
    name: 'Basic credentials',
    request: async () => ({ authorization: 'Basic YWxpY2U6cHc=' }),
    challenge: 'missing',
    reason: 'unauthenticated',
  },
  invalid('Bearer without a token', async () => ({ authorization: 'Bearer' })),
  invalid('Bearer with two tokens', async () => ({ authorization: `Bearer ${await valid()} x` })),
  invalid('a malformed token', async () => ({ authorization: 'Bearer not.a.jwt' })),
  invalid('an expired token (exp 35 s ago, tolerance 30 s)', () =>
    bearer(valid({ exp: now() - 35 })),
  ),
  invalid('a token not yet valid (nbf in 35 s)', () => bearer(valid({ nbf: now() + 35 }))),
  invalid('a token without exp', () =>
    bearer(mintToken({ iss: ISS, aud: AUD, sub: 'alice' }, { key: rsa })),
  ),
  invalid('a wrong issuer', () => bearer(valid({ iss: 'https://evil.example.com' }))),
  invalid('no issuer', () => bearer(valid({ iss: undefined }))),
  invalid('the audience of another server', () => bearer(valid({ aud: `${PUBLIC}/mcp/other` }))),
  invalid('the bare public URL as audience', () => bearer(valid({ aud: PUBLIC }))),
  invalid('no audience', () => bearer(valid({ aud: undefined }))),
  invalid('alg: none', () => forged({ attack: 'alg-none' })),
  invalid('HS256 keyed with the RSA public key', () => forged({ attack: 'hs256-public-key' })),
  invalid('an embedded jwk header (attacker key)', () =>
    forged({ key: attacker, kid: null, attack: 'embedded-jwk' }),
  ),
  invalid('a forged signature under a known kid', () => forged({ key: attacker, kid: rsa.kid })),
  // The one token that may fetch: a kid the set lacks could be a key just rotated in (at most
  // once per jwksCooldownMs; the cooldown is tested in test/unit/auth/remote-jwks.test.ts).
  { ...invalid('an unknown kid', () => forged({ key: attacker, kid: 'no-such-kid' })), fetches: 1 },
  invalid('an unknown crit header', () =>
    forged({ header: { crit: ['x-unknown'], 'x-unknown': 1 } }),
  ),
  invalid('an oversized token (12 KiB, validly signed)', () => forged({ minLength: 12 * 1024 })),
  {
    name: 'a valid token in the query string',
    request: async () => ({ query: `?access_token=${await valid()}` }),
    challenge: 'query',
    reason: 'token_in_query',
  },
  {
    name: 'a query token beside a valid header token',
    request: async () => ({
      authorization: `Bearer ${await valid()}`,
      query: `?access_token=${await valid()}`,
    }),
    challenge: 'query',
    reason: 'token_in_query',
  },
]

describe('JWT authentication refuses', () => {
  it.each(REFUSED)('$name with 401, its challenge, and nothing forwarded', async (c) => {
    const { authorization, query = '' } = await c.request()
    const before = { backend: backend.requests.length, jwks: jwks.hits }
    const headers = authorization === undefined ? {} : { authorization }
    const res = await call(undefined, `/mcp/weather${query}`, headers)
    expect(res.status).toBe(401)
    expect(res.headers['www-authenticate']).toBe(CHALLENGE[c.challenge])
    expect(res.headers['x-mcp-gateway-error']).toBe(c.reason)
    expect(res.response().error).toMatchObject({
      code: -31001,
      data: { source: 'gateway', reason: c.reason },
    })
    expect(backend.requests.length).toBe(before.backend)
    // No other token, however crafted, makes the gateway fetch keys
    expect(jwks.hits).toBe(before.jwks + (c.fetches ?? 0))
  })

  it('a jku / x5u header without ever contacting the URL it names', async () => {
    const token = await mintToken(claimsFor(ISS, AUD), {
      key: attacker,
      kid: 'attacker',
      header: { jku: trap.url, x5u: trap.url },
    })
    const before = backend.requests.length
    const res = await call(token)
    expect(res.status).toBe(401)
    expect(res.headers['www-authenticate']).toBe(CHALLENGE.invalid)
    expect(backend.requests.length).toBe(before)
    expect(trap.hits).toBe(0)
  })

  it('a token for one server at another server', async () => {
    const res = await call(await valid(), '/mcp/other')
    expect(res.status).toBe(401)
    expect(res.headers['www-authenticate']).toBe(
      `Bearer error="invalid_token", resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp/other"`,
    )
  })

  it('before the body is read: 401, not the -32020 a header/body mismatch would get', async () => {
    const res = await mcpPost(
      `${gw.url}/mcp/weather`,
      'tools/call',
      { name: 'echo' },
      {
        headers: { 'mcp-name': 'delete_repo' },
      },
    )
    expect(res.status).toBe(401)
    expect(res.response().error?.code).toBe(-31001)
  })
})

describe('JWT authentication accepts', () => {
  const ACCEPTED: readonly { name: string; token: () => Promise<string>; scheme?: string }[] = [
    { name: 'an RS256 token', token: () => valid() },
    { name: 'an ES256 token', token: () => valid({}, ec) },
    { name: 'a lower-case bearer scheme (RFC 9110)', token: () => valid(), scheme: 'bearer' },
    { name: 'exp 25 s ago, within the 30 s tolerance', token: () => valid({ exp: now() - 25 }) },
    { name: 'nbf in 25 s, within the 30 s tolerance', token: () => valid({ nbf: now() + 25 }) },
    {
      name: 'an audience list that contains this server',
      token: () => valid({ aud: ['https://x.example', AUD] }),
    },
  ]

  it.each(ACCEPTED)('$name, and forwards neither it nor cookies', async (c) => {
    const token = await c.token()
    const before = backend.requests.length
    const res: RawResponse = await call(undefined, '/mcp/weather', {
      authorization: `${c.scheme ?? 'Bearer'} ${token}`,
      cookie: 'session=secret',
    })
    expect(res.status).toBe(200)
    expect(res.response().result).toBeDefined()
    expect(backend.requests.length).toBe(before + 1)
    // the afterEach hook proves the token and the cookie stayed at the gateway
  })
})
