import type { ServerResponse } from 'node:http'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  checkJwksUri,
  discoverJwksUri,
  discoveredLocation,
  metadataUrls,
} from '../../../src/auth/discovery.js'
import { RemoteJwks } from '../../../src/auth/remote-jwks.js'
import { closeServer, generateTestKey, listenOn, manualClock } from '../../helpers/tokens.js'

/**
 * Finding the key set from the issuer alone (docs/auth.md, Key fetching): the locations MCP
 * clients try, in their order; the issuer check of RFC 8414 §3.3; bounded, no redirects.
 */

type Route = (res: ServerResponse, base: string) => void

/** An identity provider whose well-known paths answer with the given routes (others 404). */
async function idp(routes: Record<string, Route>) {
  const paths: string[] = []
  const { server, url } = await listenOn((req, res) => {
    paths.push(req.url ?? '')
    const route = routes[req.url ?? '']
    if (route === undefined) return void res.writeHead(404).end()
    route(res, url)
  })
  onTestFinished(() => closeServer(server))
  return { url, paths }
}

const json =
  (body: unknown): Route =>
  (res) =>
    void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
const meta =
  (issuerPath: string, jwksPath = '/keys'): Route =>
  (res, base) =>
    json({ issuer: `${base}${issuerPath}`, jwks_uri: `${base}${jwksPath}` })(res, base)

describe('issuer metadata discovery', () => {
  it('tries the locations MCP clients try, in their order', () => {
    expect(metadataUrls('https://idp.example.com')).toEqual([
      'https://idp.example.com/.well-known/oauth-authorization-server',
      'https://idp.example.com/.well-known/openid-configuration',
    ])
    expect(metadataUrls('https://idp.example.com/realms/acme/')).toEqual([
      'https://idp.example.com/.well-known/oauth-authorization-server/realms/acme',
      'https://idp.example.com/.well-known/openid-configuration/realms/acme',
      'https://idp.example.com/realms/acme/.well-known/openid-configuration',
    ])
  })

  it('takes jwks_uri from the RFC 8414 document first', async () => {
    const s = await idp({
      '/.well-known/oauth-authorization-server': meta('', '/as-keys'),
      '/.well-known/openid-configuration': meta('', '/oidc-keys'),
    })
    expect((await discoverJwksUri(s.url, 2000)).href).toBe(`${s.url}/as-keys`)
    expect(s.paths).toEqual(['/.well-known/oauth-authorization-server'])
  })

  it('falls back to OpenID Connect discovery, appended to a path (Keycloak realms)', async () => {
    const s = await idp({ '/realms/acme/.well-known/openid-configuration': meta('/realms/acme') })
    expect((await discoverJwksUri(`${s.url}/realms/acme`, 2000)).href).toBe(`${s.url}/keys`)
    expect(s.paths).toEqual([
      '/.well-known/oauth-authorization-server/realms/acme',
      '/.well-known/openid-configuration/realms/acme',
      '/realms/acme/.well-known/openid-configuration',
    ])
  })

  it.each([
    ['names another issuer', meta('/other'), 'metadata names another issuer'],
    ['is not JSON', (res: ServerResponse) => void res.writeHead(200).end('<html>'), 'not JSON'],
    [
      'redirects',
      (res: ServerResponse) => void res.writeHead(302, { location: '/elsewhere' }).end(),
      'answered 302, not followed',
    ],
    ['fails', (res: ServerResponse) => void res.writeHead(500).end(), 'answered 500'],
  ] as const)('refuses a document that %s', async (_, route, message) => {
    const s = await idp({ '/.well-known/oauth-authorization-server': route as Route })
    await expect(discoverJwksUri(s.url, 2000)).rejects.toThrow(message)
    // A bad answer ends discovery: no later location can override it.
    expect(s.paths).toEqual(['/.well-known/oauth-authorization-server'])
  })

  it('refuses a jwks_uri without https from an https issuer', () => {
    const issuer = 'https://idp.example.com'
    const doc = (jwks: string) => JSON.stringify({ issuer, jwks_uri: jwks })
    expect(() => checkJwksUri(doc('http://idp.example.com/keys'), issuer)).toThrow(
      'jwks_uri is not https',
    )
    expect(() => checkJwksUri(doc('file:///etc/keys'), issuer)).toThrow('jwks_uri is not https')
    expect(checkJwksUri(doc('https://keys.example.com/x'), issuer).href).toBe(
      'https://keys.example.com/x',
    )
    // A local identity provider on http may serve its keys on http.
    const local = JSON.stringify({ issuer: 'http://127.0.0.1:1', jwks_uri: 'http://127.0.0.1:1/k' })
    expect(checkJwksUri(local, 'http://127.0.0.1:1').protocol).toBe('http:')
  })

  it('says when the issuer publishes nothing', async () => {
    const s = await idp({})
    await expect(discoverJwksUri(s.url, 2000)).rejects.toThrow('issuer publishes no metadata')
  })

  it('feeds the remote key set, and looks again after a failed fetch', async () => {
    const key = await generateTestKey('ES256', 'k1')
    let keysPath = '/keys-1'
    const s = await idp({
      '/.well-known/oauth-authorization-server': (res, base) => meta('', keysPath)(res, base),
      '/keys-2': json({ keys: [key.jwk] }),
    })
    const clock = manualClock()
    const remote = new RemoteJwks(discoveredLocation(s.url, 2000), {
      timeoutMs: 2000,
      cooldownMs: 0,
      cacheMaxAgeMs: 60_000,
      now: clock.now,
    })
    const header = { alg: key.alg, kid: key.kid }
    const TOKEN = { payload: '', signature: '' }
    // The set moved (404 at the old URL): the failure makes the next fetch rediscover.
    await expect(remote.resolve(header, TOKEN)).rejects.toThrow('answered 404')
    keysPath = '/keys-2'
    clock.advance(1000)
    await remote.resolve(header, TOKEN)
    expect(s.paths).toEqual([
      '/.well-known/oauth-authorization-server',
      '/keys-1',
      '/.well-known/oauth-authorization-server',
      '/keys-2',
    ])
  })

  it('keeps the keys it holds when the set moves and the new location fails too', async () => {
    const [k1, k2] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k2'),
    ])
    let keysPath = '/keys-1'
    const s = await idp({
      '/.well-known/oauth-authorization-server': (res, base) => meta('', keysPath)(res, base),
      '/keys-1': (res, base) =>
        keysPath === '/keys-1' ? json({ keys: [k1.jwk] })(res, base) : res.writeHead(404).end(),
      '/keys-2': (res) => void res.writeHead(500).end(),
    })
    const clock = manualClock()
    const remote = new RemoteJwks(discoveredLocation(s.url, 2000), {
      timeoutMs: 2000,
      cooldownMs: 5000,
      cacheMaxAgeMs: 60_000,
      now: clock.now,
    })
    const TOKEN = { payload: '', signature: '' }
    const k1Key = await remote.resolve({ alg: k1.alg, kid: k1.kid }, TOKEN)
    // The set moved and its new location fails: an unknown kid finds the old one gone...
    keysPath = '/keys-2'
    s.paths.length = 0
    await expect(remote.resolve({ alg: k2.alg, kid: k2.kid }, TOKEN)).rejects.toThrow(/404/)
    clock.advance(5000)
    await expect(remote.resolve({ alg: k2.alg, kid: k2.kid }, TOKEN)).rejects.toThrow(/500/)
    expect(s.paths).toEqual(['/keys-1', '/.well-known/oauth-authorization-server', '/keys-2'])
    // ...the next one rediscovers the new one, and the fresh set fetched from the old one still
    // verifies there, with no fetch of its own (jose's resolver starts from jwksCache).
    expect(remote.fresh()).toBe(true)
    const again = await remote.resolve({ alg: k1.alg, kid: k1.kid }, TOKEN)
    expect(await remote.identify(again)).toBe(await remote.identify(k1Key))
    expect(remote.serves(await remote.identify(again))).toBe(true)
    expect(s.paths).toHaveLength(3)
  })
})
