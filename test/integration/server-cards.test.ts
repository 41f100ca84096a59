import { createServer } from 'node:net'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { describe, expect, it } from 'vitest'
import { request } from 'undici'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { SDK_SERVER_TOOLS, startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

/**
 * Server Cards and the AI Catalog (docs/operations.md §Server Cards): a client that knows only the
 * gateway's host finds its endpoints in /.well-known/ai-catalog.json, reads each card and connects
 * to what the card says, with the official SDK clients of both eras, to real SDK backends.
 */

const CARD_TYPE = 'application/mcp-server-card+json'
const SECRET = 'upstream-secret-0123456789'

/** A port nothing listens on now, so the gateway's public URL can name it before it starts. */
async function freePort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  const port = (srv.address() as { port: number }).port
  await new Promise<void>((resolve) => srv.close(() => resolve()))
  return port
}

interface Got {
  readonly status: number
  readonly headers: Record<string, string>
  readonly text: string
}

async function get(
  url: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<Got> {
  const res = await request(url, { method: method as 'GET', headers })
  const text = await res.body.text()
  const h: Record<string, string> = {}
  for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h[k] = v
  return { status: res.statusCode, headers: h, text }
}

interface Catalog {
  specVersion: string
  entries: { identifier: string; type: string; mediaType: string; url: string }[]
}
interface Card {
  name: string
  version: string
  description: string
  title?: string
  remotes: { type: string; url: string; supportedProtocolVersions: string[]; headers?: unknown[] }[]
  _meta?: Record<string, { resource: string; resourceMetadata: string; scopesRequired: string[] }>
}

/**
 * A gateway whose public URL is its own address: `weather` (2025-era clients allowed), `strict`
 * (2026-07-28 only, with a configured title and description), `hidden` (unlisted) and a virtual
 * server `all` over `weather`. Every server sends a secret upstream header.
 */
async function setup(extra: Record<string, unknown> = {}) {
  const a = await closing(startSdkServer())
  const b = await closing(startSdkServer())
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const headers = { 'x-api-key': SECRET }
  const gw = await startTestGateway({
    listen: { host: '127.0.0.1', port },
    cards: { publicUrl: base },
    servers: {
      weather: { upstreams: [{ url: a.url }], headers },
      strict: {
        upstreams: [{ url: b.url }],
        headers,
        legacyClients: 'reject',
        card: { title: 'Strict weather', description: 'Forecasts, 2026-07-28 clients only.' },
      },
      hidden: { upstreams: [{ url: b.url }], headers, card: { listed: false } },
    },
    virtualServers: { all: { members: ['weather'], card: { title: 'Everything' } } },
    ...extra,
  })
  return { gw, base, backends: [a, b] as const }
}

/** The official v2 client with its default negotiation (none: a 2025-11-25 `initialize`). */
async function connectV2Legacy(url: string): Promise<Client> {
  const client = new Client({ name: 'card-reader', version: '1.0.0' }, { capabilities: {} })
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  return client
}

function expectNoBackendIn(text: string, backends: readonly SdkTestServer[]): void {
  for (const backend of backends) {
    const u = new URL(backend.url)
    expect(text).not.toContain(backend.url)
    expect(text).not.toContain(u.host)
    expect(text).not.toContain(`:${u.port}`)
  }
  expect(text).not.toContain(SECRET)
  expect(text).not.toContain('x-api-key')
}

describe('Server Cards and the AI Catalog', () => {
  it('a client discovers every listed endpoint and connects to what its card says, both eras', async () => {
    const { gw, base, backends } = await setup()
    const cat = await get(`${base}/.well-known/ai-catalog.json`)
    expect(cat.status).toBe(200)
    expect(cat.headers['content-type']).toBe('application/ai-catalog+json')
    const catalog = JSON.parse(cat.text) as Catalog
    expect(catalog.specVersion).toBe('1.0')
    expect(catalog.entries.map((e) => e.identifier)).toEqual([
      'urn:air:127.0.0.1:mcp:weather',
      'urn:air:127.0.0.1:mcp:strict',
      'urn:air:127.0.0.1:mcp:all',
    ])
    for (const entry of catalog.entries) {
      expect(entry.type).toBe(CARD_TYPE)
      const res = await get(entry.url, { accept: CARD_TYPE })
      expect(res.status).toBe(200)
      expect(res.headers['content-type']).toBe(CARD_TYPE)
      const card = JSON.parse(res.text) as Card
      expect(card.name).toMatch(/^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/)
      expect(card.remotes).toHaveLength(1)
      const remote = card.remotes[0] as Card['remotes'][number]
      expect(remote.type).toBe('streamable-http')
      expect(entry.url).toBe(`${remote.url}/server-card`)
      // No auth: configured, so the card asks for no credentials.
      expect(remote.headers).toBeUndefined()
      expect(card._meta).toBeUndefined()

      const modern = await closing(connectClient(remote.url))
      expect(modern.getProtocolEra()).toBe('modern')
      expect((await modern.listTools()).tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
      if (remote.supportedProtocolVersions.includes('2025-11-25')) {
        const v2 = await closing(connectV2Legacy(remote.url))
        expect(v2.getProtocolEra()).toBe('legacy')
        expect((await v2.listTools()).tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
        const v1 = await closing(connectLegacyClient(remote.url))
        expect((await v1.listTools()).tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
      } else {
        // The card says what the endpoint does: a 2025-era client is refused there.
        await expect(connectV2Legacy(remote.url)).rejects.toThrow()
        await expect(connectLegacyClient(remote.url)).rejects.toThrow()
      }
    }
    const cards = await Promise.all(
      catalog.entries.map(async (e) => JSON.parse((await get(e.url)).text) as Card),
    )
    expect(cards.map((c) => [c.name, c.title, c.remotes[0]?.supportedProtocolVersions])).toEqual([
      ['127.0.0.1/weather', undefined, ['2026-07-28', '2025-11-25']],
      ['127.0.0.1/strict', 'Strict weather', ['2026-07-28']],
      ['127.0.0.1/all', 'Everything', ['2026-07-28', '2025-11-25']],
    ])
    expect(cards[1]?.description).toBe('Forecasts, 2026-07-28 clients only.')
    expect(gw.logs.some((l) => l.level === 50)).toBe(false)
    // The backends saw MCP traffic only: nothing of a card fetch reached them.
    for (const backend of backends)
      for (const r of backend.requests) expect(r.url).not.toContain('server-card')
  })

  it('no card and no catalog names a backend URL, host:port or upstream header', async () => {
    const { base, backends } = await setup()
    const texts = [(await get(`${base}/.well-known/ai-catalog.json`)).text]
    for (const name of ['weather', 'strict', 'hidden', 'all']) {
      texts.push((await get(`${base}/mcp/${name}/server-card`)).text)
    }
    for (const text of texts) expectNoBackendIn(text, backends)
  })

  it('a hidden endpoint is absent from the catalog, its card is an unknown server, it still serves MCP', async () => {
    const { base, backends } = await setup()
    const catalog = (await get(`${base}/.well-known/ai-catalog.json`)).text
    expect(catalog).not.toContain('hidden')
    const hidden = await get(`${base}/mcp/hidden/server-card`)
    const unknown = await get(`${base}/mcp/nosuch/server-card`)
    expect(hidden.status).toBe(404)
    expect(hidden.text).toBe(unknown.text)
    expect(hidden.headers['content-type']).toBe(unknown.headers['content-type'])
    const client = await closing(connectClient(`${base}/mcp/hidden`))
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    expect(backends[1].calls('tools/list').length).toBeGreaterThan(0)
  })

  it('an unknown server is a 404 JSON error; card paths are never MCP requests', async () => {
    const { base, backends } = await setup()
    const res = await get(`${base}/mcp/nosuch/server-card`)
    expect(res.status).toBe(404)
    expect(res.headers['content-type']).toBe('application/json')
    expect(JSON.parse(res.text)).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32601, data: { reason: 'unknown_server' } },
    })
    // An MCP POST to a card path is no MCP request: 404, and no backend sees it.
    const before = backends.map((b) => b.requests.length)
    const post = await request(`${base}/mcp/weather/server-card`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    })
    await post.body.text()
    expect(post.statusCode).toBe(404)
    expect(backends.map((b) => b.requests.length)).toEqual(before)
    // Deeper paths and encoded slashes name no server.
    expect((await get(`${base}/mcp/weather/server-card/x`)).status).toBe(404)
    expect((await get(`${base}/mcp/weather%2Fx/server-card`)).status).toBe(404)
  })

  it('cards and the catalog revalidate with strong ETags: 304, HEAD, Cache-Control, CORS', async () => {
    const { base } = await setup()
    for (const url of [`${base}/mcp/weather/server-card`, `${base}/.well-known/ai-catalog.json`]) {
      const first = await get(url)
      const etag = first.headers.etag as string
      expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/)
      expect(first.headers['cache-control']).toBe('public, max-age=300')
      expect(first.headers['access-control-allow-origin']).toBe('*')
      expect(first.headers['access-control-expose-headers']).toBe('ETag')
      // The same bytes, the same tag.
      const again = await get(url)
      expect(again.text).toBe(first.text)
      expect(again.headers.etag).toBe(etag)
      for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const res = await get(url, { 'if-none-match': inm })
        expect(res.status).toBe(304)
        expect(res.text).toBe('')
        expect(res.headers.etag).toBe(etag)
        expect(res.headers['cache-control']).toBe('public, max-age=300')
      }
      const changed = await get(url, { 'if-none-match': '"other"' })
      expect(changed.status).toBe(200)
      expect(changed.text).toBe(first.text)
      const head = await get(url, {}, 'HEAD')
      expect(head.status).toBe(200)
      expect(head.text).toBe('')
      expect(head.headers.etag).toBe(etag)
      expect(head.headers['content-type']).toBe(first.headers['content-type'])
      const preflight = await get(
        url,
        {
          origin: 'https://app.example',
          'access-control-request-method': 'GET',
          'access-control-request-headers': 'if-none-match',
        },
        'OPTIONS',
      )
      expect(preflight.status).toBe(204)
      expect(preflight.headers['access-control-allow-headers']).toContain('If-None-Match')
    }
    // Tags differ between documents.
    const a = await get(`${base}/mcp/weather/server-card`)
    const b = await get(`${base}/mcp/all/server-card`)
    expect(a.headers.etag).not.toBe(b.headers.etag)
  })

  it('with auth: the card is public, names the RFC 9728 metadata and scopes, and a token from it connects', async () => {
    const backend = await closing(startSdkServer())
    const key = await generateTestKey('ES256')
    const jwks = await closing(startJwks([key]))
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const iss = 'https://idp.example.com'
    const gw: TestGateway = await startTestGateway({
      listen: { host: '127.0.0.1', port },
      auth: { publicUrl: base, jwt: { issuer: iss, jwksUrl: jwks.url } },
      servers: { weather: { upstreams: [{ url: backend.url }], requiredScopes: ['mcp:tools'] } },
      virtualServers: { all: { members: ['weather'] } },
    })
    const catalog = JSON.parse((await get(`${base}/.well-known/ai-catalog.json`)).text) as Catalog
    expect(catalog.entries.map((e) => e.url)).toEqual([
      `${base}/mcp/weather/server-card`,
      `${base}/mcp/all/server-card`,
    ])
    for (const entry of catalog.entries) {
      const res = await get(entry.url) // no token: cards are public connectivity data
      expect(res.status).toBe(200)
      expectNoBackendIn(res.text, [backend])
      const card = JSON.parse(res.text) as Card
      const remote = card.remotes[0] as Card['remotes'][number]
      expect(remote.headers).toEqual([
        expect.objectContaining({ name: 'Authorization', isRequired: true, isSecret: true }),
      ])
      const hint = card._meta?.['mcp-edge/authorization']
      expect(hint?.scopesRequired).toEqual(['mcp:tools'])
      expect(hint?.resource).toBe(remote.url)
      // The metadata the card names is the gateway's own RFC 9728 document for that endpoint.
      const prm = JSON.parse((await get(hint?.resourceMetadata as string)).text) as {
        resource: string
        scopes_supported: string[]
      }
      expect(prm.resource).toBe(remote.url)
      expect(prm.scopes_supported).toEqual(['mcp:tools'])
      // Without a token the endpoint itself refuses; with one for its resource it connects.
      await expect(connectClient(remote.url)).rejects.toThrow()
      const token = await mintToken(claimsFor(iss, prm.resource, { scope: 'mcp:tools' }), { key })
      const client = await closing(connectClient(remote.url, { auth: token }))
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual([...SDK_SERVER_TOOLS])
    }
    expect(gw.logs.some((l) => l.level === 50)).toBe(false)
  })

  it('are not served where the gateway does not know its public URL, or with cards off', async () => {
    const backend = await closing(startSdkServer())
    const servers = { weather: { upstreams: [{ url: backend.url }] } }
    for (const config of [
      { servers },
      { servers, cards: { enabled: false, publicUrl: 'https://mcp.example.com' } },
    ]) {
      const gw = await startTestGateway(config)
      expect((await get(`${gw.url}/.well-known/ai-catalog.json`)).status).toBe(404)
      expect((await get(`${gw.url}/mcp/weather/server-card`)).status).toBe(404)
    }
  })

  it('a reload replaces the documents: new tags, a newly hidden endpoint gone', async () => {
    const backend = await closing(startSdkServer())
    const config = (listed: boolean) => ({
      listen: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      cards: { publicUrl: 'https://mcp.example.com' },
      servers: {
        a: { upstreams: [{ url: backend.url }] },
        b: { upstreams: [{ url: backend.url }], card: { listed } },
      },
    })
    const gw = await startTestGateway(config(true))
    const catalogUrl = `${gw.url}/.well-known/ai-catalog.json`
    const before = await get(catalogUrl)
    expect(before.text).toContain('/mcp/b/server-card')
    expect((await get(`${gw.url}/mcp/b/server-card`)).status).toBe(200)
    const cardA = await get(`${gw.url}/mcp/a/server-card`)
    await gw.reload(parseConfigText(stringify(config(false)), { dir: process.cwd(), env: {} }))
    const after = await get(catalogUrl, { 'if-none-match': before.headers.etag as string })
    expect(after.status).toBe(200)
    expect(after.headers.etag).not.toBe(before.headers.etag)
    expect(after.text).not.toContain('/mcp/b/')
    expect((await get(`${gw.url}/mcp/b/server-card`)).status).toBe(404)
    // An unchanged card keeps its tag across the reload: clients revalidate to 304.
    const again = await get(`${gw.url}/mcp/a/server-card`, {
      'if-none-match': cardA.headers.etag as string,
    })
    expect(again.status).toBe(304)
  })

  it('refuses a second public URL next to auth.publicUrl at startup', async () => {
    const backend = await closing(startSdkServer())
    await expect(
      startTestGateway({
        auth: {
          publicUrl: 'https://a.example',
          jwt: { issuer: 'https://idp.example', jwksUrl: 'https://idp.example/jwks' },
        },
        cards: { publicUrl: 'https://b.example' },
        servers: { w: { upstreams: [{ url: backend.url }] } },
      }),
    ).rejects.toThrow(/cards\.publicUrl/)
  })

  it('names cards under the configured namespace and the public host otherwise', async () => {
    const backend = await closing(startSdkServer())
    const servers = { weather: { upstreams: [{ url: backend.url }] } }
    const gw = await startTestGateway({
      servers,
      cards: { publicUrl: 'https://mcp.example.com/edge' },
    })
    const catalog = JSON.parse((await get(`${gw.url}/.well-known/ai-catalog.json`)).text) as Catalog
    expect(catalog.entries).toEqual([
      expect.objectContaining({
        identifier: 'urn:air:mcp.example.com:mcp:weather',
        url: 'https://mcp.example.com/edge/mcp/weather/server-card',
      }),
    ])
    const card = JSON.parse((await get(`${gw.url}/mcp/weather/server-card`)).text) as Card
    expect(card.name).toBe('com.example.mcp/weather')
    expect(card.remotes[0]?.url).toBe('https://mcp.example.com/edge/mcp/weather')
    const named = await startTestGateway({
      servers,
      cards: { publicUrl: 'https://mcp.example.com', namespace: 'com.example' },
    })
    const card2 = JSON.parse((await get(`${named.url}/mcp/weather/server-card`)).text) as Card
    expect(card2.name).toBe('com.example/weather')
  })
})
