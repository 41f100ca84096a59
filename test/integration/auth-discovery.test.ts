import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, parseConfigText } from '../../src/runtime/load.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { mcpPost } from '../helpers/clients.js'
import { startNonValidatingBackend, type TestServer } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  closeServer,
  generateTestKey,
  listenOn,
  mintToken,
  type TestKey,
} from '../helpers/tokens.js'
import { closing } from '../helpers/lifecycle.js'

/**
 * The gateway configured with only its issuer finds the keys from the issuer's metadata
 * (docs/auth.md, Key fetching). The sign-in flows against a real authorization server are in
 * oauth-sign-in tests; this one pins the gateway's side: what it asks, what it refuses.
 */

const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/weather`

/** An identity provider on 127.0.0.1: RFC 8414 metadata naming `issuerInDoc` and its keys. */
async function identityProvider(key: TestKey, issuerInDoc?: (url: string) => string) {
  const paths: string[] = []
  const { server, url } = await listenOn((req, res) => {
    paths.push(req.url ?? '')
    const send = (body: unknown) =>
      void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
    if (req.url === '/.well-known/oauth-authorization-server') {
      return send({ issuer: issuerInDoc?.(url) ?? url, jwks_uri: `${url}/certs` })
    }
    if (req.url === '/certs') return send({ keys: [key.jwk] })
    res.writeHead(404).end()
  })
  onTestFinished(() => closeServer(server))
  return { url, paths }
}

async function gatewayFor(issuer: string, backend: TestServer): Promise<RunningGateway> {
  const config = {
    listen: { host: '127.0.0.1', port: 0 },
    log: { level: 'silent' },
    auth: { publicUrl: PUBLIC, jwt: { issuer } },
    servers: { weather: { upstreams: [{ url: backend.url }] } },
  }
  const gw = await startGateway(parseConfigText(stringify(config), { dir: process.cwd(), env: {} }))
  onTestFinished(() => gw.close(200))
  return gw
}

const call = (gw: RunningGateway, bearer: string) =>
  mcpPost(`${gw.url}/mcp/weather`, 'tools/call', { name: 'echo', arguments: {} }, { auth: bearer })

describe('keys discovered from the issuer', () => {
  it('verifies tokens with the keys the issuer metadata names', async () => {
    const key = await generateTestKey('ES256')
    const idp = await identityProvider(key)
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(idp.url, backend)
    const token = await mintToken(claimsFor(idp.url, AUD), { key })
    expect((await call(gw, token)).status).toBe(200)
    expect((await call(gw, token)).status).toBe(200)
    expect(idp.paths).toEqual(['/.well-known/oauth-authorization-server', '/certs'])
    expect(backend.requests.length).toBe(2)
  })

  it('refuses metadata that names another issuer: 503, nothing forwarded', async () => {
    const key = await generateTestKey('ES256')
    const idp = await identityProvider(key, () => 'https://evil.example.com')
    const backend = await closing(startNonValidatingBackend())
    const gw = await gatewayFor(idp.url, backend)
    const res = await call(gw, await mintToken(claimsFor(idp.url, AUD), { key }))
    expect(res.status).toBe(503)
    expect(res.headers['x-mcp-gateway-error']).toBe('auth_unavailable')
    expect(res.headers['retry-after']).toBe('1')
    // The keys the document points to are never fetched.
    expect(idp.paths).toEqual(['/.well-known/oauth-authorization-server'])
    expect(backend.requests.length).toBe(0)
  })

  it('needs a key source when several issuers are accepted', () => {
    const config = {
      auth: { publicUrl: PUBLIC, jwt: { issuer: ['https://a.example', 'https://b.example'] } },
      servers: { weather: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } },
    }
    expect(() => parseConfigText(stringify(config), { dir: process.cwd(), env: {} })).toThrow(
      ConfigError,
    )
    try {
      parseConfigText(stringify(config), { dir: process.cwd(), env: {} })
    } catch (err) {
      expect((err as ConfigError).problems).toContain(
        'auth.jwt: with several issuers, set jwksUrl, jwksFile or publicKeyFile',
      )
    }
  })
})
