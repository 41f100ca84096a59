import { describe, expect, it } from 'vitest'
import { request } from 'undici'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * Server Cards are public and cached by anyone (`Cache-Control: public`): what they say must come
 * from the gateway's config alone (docs/operations.md §Server Cards). A card built from the
 * request's Host would let one request poison shared caches with a card that sends clients, and
 * their tokens, elsewhere; a card that named a backend would publish internal addresses.
 */

const PUBLIC = 'https://mcp.example.com'
const SECRET = 'upstream-credential-4d1f'

async function fetchText(url: string, headers: Record<string, string>) {
  const res = await request(url, { headers })
  return { status: res.statusCode, text: await res.body.text() }
}

describe('Server Cards: what a card says', () => {
  it('comes from the configured public URL, never from Host or X-Forwarded-*', async () => {
    const backend = await closing(startSdkServer())
    const gw = await startTestGateway({
      cards: { publicUrl: PUBLIC },
      servers: { app: { upstreams: [{ url: backend.url }], headers: { 'x-key': SECRET } } },
      virtualServers: { all: { members: ['app'] } },
    })
    const hostile = {
      host: 'evil.example',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'http',
      forwarded: 'host=evil.example;proto=http',
    }
    const paths = ['/mcp/app/server-card', '/mcp/all/server-card', '/.well-known/ai-catalog.json']
    for (const path of paths) {
      const { status, text } = await fetchText(`${gw.url}${path}`, hostile)
      expect(status).toBe(200)
      expect(text).not.toContain('evil')
      expect(text).toContain(`${PUBLIC}/mcp/`)
      // Nothing of the backend: its URL, its host:port, its configured headers.
      const u = new URL(backend.url)
      expect(text).not.toContain(u.host)
      expect(text).not.toContain(`:${u.port}`)
      expect(text).not.toContain(SECRET)
      expect(text).not.toContain('x-key')
    }
    expect(backend.requests).toHaveLength(0)
  })

  it('an unlisted endpoint is named by no document and its card is an unknown server', async () => {
    const backend = await closing(startSdkServer())
    const gw = await startTestGateway({
      cards: { publicUrl: PUBLIC },
      servers: {
        app: { upstreams: [{ url: backend.url }] },
        'secret-ops': { upstreams: [{ url: backend.url }], card: { listed: false } },
      },
      virtualServers: { 'secret-all': { members: ['app'], card: { listed: false } } },
    })
    const catalog = await fetchText(`${gw.url}/.well-known/ai-catalog.json`, {})
    expect(catalog.status).toBe(200)
    expect(catalog.text).toContain('/mcp/app/server-card')
    expect(catalog.text).not.toContain('secret')
    const unknown = await fetchText(`${gw.url}/mcp/nosuch/server-card`, {})
    for (const name of ['secret-ops', 'secret-all']) {
      const card = await fetchText(`${gw.url}/mcp/${name}/server-card`, {})
      expect(card).toEqual(unknown)
      expect(card.status).toBe(404)
    }
  })
})
