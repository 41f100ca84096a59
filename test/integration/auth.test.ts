import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { startTestGateway } from '../helpers/gateway.js'
import { connectClient, mcpPost, rawRequest, type RawResponse } from '../helpers/clients.js'
import {
  startNonValidatingBackend,
  startSdkServer,
  type TestServer,
} from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  manualClock,
  mintToken,
  mintedTokens,
  startJwks,
  type JwksMode,
  type JwksServer,
  type ManualClock,
  type TestKey,
} from '../helpers/tokens.js'
import { closing } from '../helpers/lifecycle.js'

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/weather`
const PRM = `${PUBLIC}/.well-known/oauth-protected-resource/mcp/weather`

/**
 * A gateway in front of `backend` with JWT auth from `jwt` (merged over the defaults). Its auth
 * reads `clock` (key-cache age, cooldown, backoff), so tests move time instead of sleeping.
 */
async function gatewayFor(
  backend: TestServer,
  jwt: Record<string, unknown>,
  extra: { auth?: Record<string, unknown>; weather?: Record<string, unknown> } = {},
  clock: ManualClock = manualClock(),
): Promise<RunningGateway> {
  const config = {
    listen: { host: '127.0.0.1', port: 0 },
    log: { level: 'silent' },
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, ...jwt }, ...extra.auth },
    servers: { weather: { upstreams: [{ url: backend.url }], ...extra.weather } },
  }
  const loaded = parseConfigText(stringify(config), { dir: process.cwd(), env: {} })
  const gw = await startGateway(loaded, { auth: { now: clock.now } })
  onTestFinished(() => gw.close(200))
  return gw
}

/** No recorded request carries a credential header or any minted token, anywhere. */
function expectNoTokenPassthrough(server: TestServer): void {
  for (const req of server.requests) {
    expect(req.header('authorization')).toBeUndefined()
    const wire = `${req.url}\n${req.rawHeaders.join('\n')}\n${req.body.toString('utf8')}`
    for (const token of mintedTokens) expect(wire.includes(token)).toBe(false)
  }
}

const token = (key: TestKey, extra = {}, aud: string = AUD): Promise<string> =>
  mintToken(claimsFor(ISS, aud, extra), { key })

function callTool(gw: RunningGateway, bearer?: string): Promise<RawResponse> {
  return mcpPost(
    `${gw.url}/mcp/weather`,
    'tools/call',
    { name: 'echo', arguments: {} },
    {
      ...(bearer !== undefined && { auth: bearer }),
    },
  )
}

async function jwksWith(...keys: TestKey[]): Promise<JwksServer> {
  return closing(startJwks(keys))
}

describe('remote JWKS', () => {
  it('refetches at once for an unknown kid (concurrent misses share the fetch), then not again during the cooldown', async () => {
    const [rsa, stranger] = await Promise.all([generateTestKey('RS256'), generateTestKey('RS256')])
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const clock = manualClock()
    const gw = await gatewayFor(backend, { jwksUrl: jwks.url, jwksCooldownMs: 1500 }, {}, clock)
    expect((await callTool(gw, await token(rsa))).status).toBe(200)
    expect(jwks.hits).toBe(1)
    // Right after the first fetch: an unknown kid may be a key just rotated in, so it asks.
    const unknown = await token(stranger)
    const first = await Promise.all(Array.from({ length: 20 }, () => callTool(gw, unknown)))
    expect(first.map((r) => r.status)).toEqual(Array(20).fill(401))
    expect(jwks.hits).toBe(2)
    const again = await Promise.all(Array.from({ length: 20 }, () => callTool(gw, unknown)))
    expect(again.map((r) => r.status)).toEqual(Array(20).fill(401))
    expect(jwks.hits).toBe(2) // cooling down: no fetch storm from random kids
    clock.advance(1500) // the cooldown after that refetch is over
    expect((await callTool(gw, await token(stranger))).status).toBe(401)
    expect(jwks.hits).toBe(3)
    expect(backend.requests.length).toBe(1)
  })

  it('follows a key rotation: the new key is fetched on first sight, the retired one refused', async () => {
    const [oldKey, newKey] = await Promise.all([generateTestKey('RS256'), generateTestKey('ES256')])
    const jwks = await jwksWith(oldKey)
    const backend = await closing(startNonValidatingBackend())
    const clock = manualClock()
    const gw = await gatewayFor(backend, { jwksUrl: jwks.url, jwksCooldownMs: 300 }, {}, clock)
    const oldToken = await token(oldKey)
    expect((await callTool(gw, oldToken)).status).toBe(200)
    jwks.setKeys([newKey])
    clock.advance(300)
    expect((await callTool(gw, await token(newKey))).status).toBe(200)
    expect(jwks.hits).toBe(2)
    expect((await callTool(gw, oldToken)).status).toBe(401)
    expectNoTokenPassthrough(backend)
  })

  it('after a rotation that keeps the kid, refuses an already-seen token of the withdrawn key', async () => {
    const [before, after, steady] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k2'),
    ])
    const jwks = await jwksWith(before, steady)
    const backend = await closing(startNonValidatingBackend())
    const clock = manualClock()
    const gw = await gatewayFor(
      backend,
      { jwksUrl: jwks.url, jwksCooldownMs: 0, jwksCacheMaxAgeMs: 1000 },
      {},
      clock,
    )
    const withdrawn = await token(before)
    const kept = await token(steady)
    expect((await callTool(gw, withdrawn)).status).toBe(200)
    expect((await callTool(gw, kept)).status).toBe(200)
    jwks.setKeys([after, steady]) // kid k1 now names another key
    clock.advance(1000)
    expect((await callTool(gw, await token(after))).status).toBe(200) // the set is refetched
    expect(jwks.hits).toBe(2)
    const seen = backend.requests.length
    const res = await callTool(gw, withdrawn)
    expect(res.status).toBe(401)
    expect(res.headers['x-mcp-gateway-error']).toBe('invalid_token')
    expect(res.headers['www-authenticate']).toBe(
      `Bearer error="invalid_token", resource_metadata="${PRM}"`,
    )
    expect(res.response().error?.code).toBe(-31001)
    expect(backend.requests.length).toBe(seen)
    expect((await callTool(gw, kept)).status).toBe(200)
    expect(jwks.hits).toBe(2)
    expectNoTokenPassthrough(backend)
  })

  const DOWN: readonly JwksMode[] = ['error500', 'reset', 'garbage', 'html', 'redirect', 'hang']
  it.each(DOWN)(
    'answers 503 + Retry-After (not 401) when the JWKS endpoint is %s at cold start, and recovers',
    async (mode) => {
      const rsa = await generateTestKey('RS256')
      const jwks = await jwksWith(rsa)
      jwks.setMode(mode)
      const backend = await closing(startNonValidatingBackend())
      const gw = await gatewayFor(backend, {
        jwksUrl: jwks.url,
        jwksCooldownMs: 0,
        jwksTimeoutMs: 300,
      })
      const valid = await token(rsa)
      const res = await callTool(gw, valid)
      expect(res.status).toBe(503)
      expect(res.headers['retry-after']).toMatch(/^[1-9]\d*$/)
      expect(res.headers['www-authenticate']).toBeUndefined()
      expect(res.headers['x-mcp-gateway-error']).toBe('auth_unavailable')
      expect(res.response().error?.code).toBe(-31503)
      expect(jwks.hits).toBeGreaterThanOrEqual(1)
      expect(backend.requests.length).toBe(0)
      jwks.setMode('ok')
      expect((await callTool(gw, valid)).status).toBe(200)
    },
  )

  it('with a warm cache and the endpoint down: known keys verify, an unknown kid is 401 after one try', async () => {
    const [rsa, stranger] = await Promise.all([generateTestKey('RS256'), generateTestKey('RS256')])
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(backend, { jwksUrl: jwks.url, jwksCooldownMs: 0 })
    expect((await callTool(gw, await token(rsa))).status).toBe(200)
    jwks.setMode('error500')
    expect((await callTool(gw, await token(rsa))).status).toBe(200)
    expect(jwks.hits).toBe(1)
    const res = await callTool(gw, await token(stranger))
    expect(res.status).toBe(401)
    expect(res.headers['www-authenticate']).toBe(
      `Bearer error="invalid_token", resource_metadata="${PRM}"`,
    )
    expect(jwks.hits).toBe(2)
  })

  it('backs off while the endpoint fails instead of fetching on every request', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    jwks.setMode('error500')
    const backend = await closing(startNonValidatingBackend())
    const clock = manualClock()
    const gw = await gatewayFor(backend, { jwksUrl: jwks.url, jwksCooldownMs: 5000 }, {}, clock)
    const valid = await token(rsa)
    for (let i = 0; i < 10; i++) {
      const res = await callTool(gw, valid)
      expect(res.status).toBe(503)
      expect(res.headers['retry-after']).toBe('1')
    }
    expect(jwks.hits).toBe(1) // one fetch per second at most, not ten
    jwks.setMode('ok')
    clock.advance(999)
    expect((await callTool(gw, valid)).status).toBe(503)
    expect(jwks.hits).toBe(1)
    clock.advance(1)
    expect((await callTool(gw, valid)).status).toBe(200)
    expect(jwks.hits).toBe(2)
    expect(backend.requests.length).toBe(1)
  })

  it('keeps fetched keys across a config reload, so a reload during an IdP outage breaks nothing', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const config = (cooldown: number, extraServer: boolean) => ({
      listen: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      auth: {
        publicUrl: PUBLIC,
        jwt: { issuer: ISS, jwksUrl: jwks.url, jwksCooldownMs: cooldown },
      },
      servers: {
        weather: { upstreams: [{ url: backend.url }] },
        ...(extraServer && { docs: { upstreams: [{ url: backend.url }] } }),
      },
    })
    const gw = await gatewayFor(backend, { jwksUrl: jwks.url, jwksCooldownMs: 0 })
    const valid = await token(rsa)
    expect((await callTool(gw, valid)).status).toBe(200)
    jwks.setMode('error500')
    const reload = (c: object) => gw.reload(parseConfigText(JSON.stringify(c), { dir: tmpdir() }))
    await reload(config(0, true)) // same key settings, another server added
    expect((await callTool(gw, valid)).status).toBe(200)
    expect(jwks.hits).toBe(1)
    await reload(config(10, true)) // changed key settings start from a cold cache
    expect((await callTool(gw, valid)).status).toBe(503)
  })

  it('refuses to go on with keys older than cacheMaxAge when they cannot be refreshed (503)', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const clock = manualClock()
    const gw = await gatewayFor(
      backend,
      { jwksUrl: jwks.url, jwksCooldownMs: 0, jwksCacheMaxAgeMs: 300 },
      {},
      clock,
    )
    const valid = await token(rsa)
    expect((await callTool(gw, valid)).status).toBe(200)
    jwks.setMode('error500')
    clock.advance(299)
    expect((await callTool(gw, valid)).status).toBe(200)
    clock.advance(1)
    expect((await callTool(gw, valid)).status).toBe(503)
    expect(backend.requests.length).toBe(2)
  })
})

describe('protected resource metadata (RFC 9728)', () => {
  it('serves per-server and root documents with absolute URLs from publicUrl, and the 401 points at them', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(
      backend,
      { jwksUrl: jwks.url },
      {
        auth: {
          resourceMetadata: {
            authorizationServers: ['https://as.example.com'],
            scopesSupported: ['mcp:read'],
          },
        },
        weather: { requiredScopes: ['mcp:tools'] },
      },
    )
    const challenge = (await callTool(gw)).headers['www-authenticate']
    expect(challenge).toBe(`Bearer scope="mcp:tools", resource_metadata="${PRM}"`)
    // A client behind the TLS-terminating proxy follows the URL; the gateway serves its path.
    const path = new URL(/resource_metadata="([^"]+)"/.exec(String(challenge))?.[1] ?? '').pathname
    const doc = await rawRequest('GET', `${gw.url}${path}`)
    expect(doc.status).toBe(200)
    expect(doc.json()).toEqual({
      resource: AUD,
      authorization_servers: ['https://as.example.com'],
      scopes_supported: ['mcp:tools', 'mcp:read'],
      bearer_methods_supported: ['header'],
    })
    const root = await rawRequest('GET', `${gw.url}/.well-known/oauth-protected-resource`)
    expect(root.json()).toMatchObject({
      resource: PUBLIC,
      authorization_servers: ['https://as.example.com'],
    })
    const unknown = await rawRequest(
      'GET',
      `${gw.url}/.well-known/oauth-protected-resource/mcp/nope`,
    )
    expect(unknown.status).toBe(404)
  })

  it('challenges a request without a token whatever its method; with a token GET is 405', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(backend, { jwksUrl: jwks.url })
    // Clients that probe with GET (or DELETE without a session) learn where to sign in.
    for (const method of ['GET', 'DELETE', 'PUT'] as const) {
      const probe = await rawRequest(method, `${gw.url}/mcp/weather`, {
        headers: { accept: 'text/event-stream' },
      })
      expect(probe.status, method).toBe(401)
      expect(probe.headers['www-authenticate']).toBe(`Bearer resource_metadata="${PRM}"`)
      expect(probe.headers['x-mcp-gateway-error']).toBe('unauthenticated')
    }
    const signedIn = await rawRequest('GET', `${gw.url}/mcp/weather`, {
      headers: { authorization: `Bearer ${await token(rsa)}`, accept: 'text/event-stream' },
    })
    expect(signedIn.status).toBe(405)
    expect(signedIn.headers['allow']).toBe('POST')
    expect(backend.requests.length).toBe(0)
  })

  it('puts the well-known segment before a publicUrl path prefix and serves it with or without the prefix', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(
      backend,
      { jwksUrl: jwks.url },
      { auth: { publicUrl: 'https://edge.example.com/gw/' } },
    )
    const prm = 'https://edge.example.com/.well-known/oauth-protected-resource/gw/mcp/weather'
    expect((await callTool(gw)).headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${prm}"`,
    )
    for (const path of ['/gw/mcp/weather', '/mcp/weather']) {
      const doc = await rawRequest('GET', `${gw.url}/.well-known/oauth-protected-resource${path}`)
      // authorization_servers defaults to the configured issuers
      expect(doc.json()).toEqual({
        resource: 'https://edge.example.com/gw/mcp/weather',
        authorization_servers: [ISS],
        bearer_methods_supported: ['header'],
      })
    }
    // the default audience follows the public URL
    const ok = await callTool(gw, await token(rsa, {}, 'https://edge.example.com/gw/mcp/weather'))
    expect(ok.status).toBe(200)
  })

  it('is 404 when auth is not configured', async () => {
    const backend = await closing(startNonValidatingBackend())
    const gw = await startTestGateway({
      servers: { weather: { upstreams: [{ url: backend.url }] } },
    })
    const res = await rawRequest(
      'GET',
      `${gw.url}/.well-known/oauth-protected-resource/mcp/weather`,
    )
    expect(res.status).toBe(404)
  })
})

describe('scopes', () => {
  it('answers 403 insufficient_scope naming every required scope, and accepts scope or scp', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(
      backend,
      { jwksUrl: jwks.url },
      {
        weather: { requiredScopes: ['mcp:tools', 'mcp:admin'] },
      },
    )
    const res = await callTool(gw, await token(rsa, { scope: 'mcp:tools openid' }))
    expect(res.status).toBe(403)
    expect(res.headers['www-authenticate']).toBe(
      `Bearer error="insufficient_scope", scope="mcp:tools mcp:admin", resource_metadata="${PRM}"`,
    )
    expect(res.headers['x-mcp-gateway-error']).toBe('insufficient_scope')
    expect(res.response().error?.code).toBe(-31003)
    expect(backend.requests.length).toBe(0)
    expect((await callTool(gw, await token(rsa, { scope: 'mcp:admin mcp:tools' }))).status).toBe(
      200,
    )
    expect((await callTool(gw, await token(rsa, { scp: ['mcp:tools', 'mcp:admin'] }))).status).toBe(
      200,
    )
    expectNoTokenPassthrough(backend)
  })
})

describe('the official MCP client through an authenticating gateway', () => {
  it('lists and calls tools with a valid token; the backend never sees it', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const sdk = await closing(startSdkServer())
    const gw = await gatewayFor(sdk, { jwksUrl: jwks.url })
    const client = await closing(
      connectClient(`${gw.url}/mcp/weather`, { auth: await token(rsa), pin: true }),
    )
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('get_forecast')
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'test-sdk' }] })
    expect(sdk.calls('tools/call').length).toBe(1)
    expectNoTokenPassthrough(sdk)
    await expect(connectClient(`${gw.url}/mcp/weather`, { pin: true })).rejects.toThrow()
  })
})

describe('key sources and verifier settings', () => {
  it('verifies against a PEM public key file and a local JWKS file, relative to the config', async () => {
    const [ec, rsa] = await Promise.all([generateTestKey('ES256'), generateTestKey('RS256')])
    const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-auth-'))
    await writeFile(join(dir, 'idp.pem'), ec.pem)
    await writeFile(join(dir, 'jwks.json'), JSON.stringify({ keys: [rsa.jwk] }))
    const backend = await closing(startNonValidatingBackend())
    for (const [source, good, bad] of [
      [{ publicKeyFile: 'idp.pem' }, ec, rsa],
      [{ jwksFile: 'jwks.json' }, rsa, ec],
    ] as const) {
      const gw = await startTestGateway(
        {
          auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, ...source } },
          servers: { weather: { upstreams: [{ url: backend.url }] } },
        },
        { dir },
      )
      expect((await callTool(gw, await token(good))).status).toBe(200)
      expect((await callTool(gw, await token(bad))).status).toBe(401)
    }
  })

  it('accepts any of several issuers and a configured audience, nothing else', async () => {
    const rsa = await generateTestKey('RS256')
    const jwks = await jwksWith(rsa)
    const backend = await closing(startNonValidatingBackend())
    const other = 'https://idp2.example.com'
    const gw = await gatewayFor(backend, {
      jwksUrl: jwks.url,
      issuer: [ISS, other],
      audience: 'https://api.example.com',
    })
    const api = 'https://api.example.com'
    expect((await callTool(gw, await token(rsa, {}, api))).status).toBe(200)
    expect((await callTool(gw, await token(rsa, { iss: other }, api))).status).toBe(200)
    expect(
      (await callTool(gw, await token(rsa, { iss: 'https://idp3.example.com' }, api))).status,
    ).toBe(401)
    // the per-server default is replaced by the configured audience, not added to it
    expect((await callTool(gw, await token(rsa))).status).toBe(401)
  })

  it('refuses configs that would hold a private key or mix token exchange with a static Authorization', async () => {
    const rsa = await generateTestKey('RS256')
    const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-auth-'))
    const { exportPKCS8 } = await import('jose')
    await writeFile(join(dir, 'private.pem'), await exportPKCS8(rsa.privateKey))
    const load = (config: object) => () => parseConfigText(JSON.stringify(config), { dir })
    const upstreams = [{ url: 'http://127.0.0.1:1/mcp' }]
    const exchange = { tokenUrl: 'http://127.0.0.1:1/token', clientId: 'gw', clientSecret: 'x' }
    const auth = { publicUrl: PUBLIC, jwt: { issuer: ISS, publicKeyFile: 'private.pem' } }
    expect(load({ auth, servers: { w: { upstreams } } })).toThrow(/publicKeyFile: .*private key/)
    expect(load({ servers: { w: { upstreams, tokenExchange: exchange } } })).toThrow(
      /tokenExchange: needs auth/,
    )
    const jwksAuth = {
      publicUrl: PUBLIC,
      jwt: { issuer: ISS, jwksUrl: 'https://idp.example.com/jwks' },
    }
    const headers = { Authorization: 'Bearer static' }
    expect(
      load({ auth: jwksAuth, servers: { w: { upstreams, headers, tokenExchange: exchange } } }),
    ).toThrow(/headers.Authorization: conflicts with tokenExchange/)
    expect(
      load({
        auth: { ...jwksAuth, publicUrl: 'https://x.example.com/?a=1' },
        servers: { w: { upstreams } },
      }),
    ).toThrow(/auth.publicUrl/)
  })
})
