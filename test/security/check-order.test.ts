import { describe, expect, it, onTestFinished } from 'vitest'
import { mcpBody, mcpHeaders, rawPost } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { httpHead, sendRaw } from '../helpers/raw-socket.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

/**
 * reliability.md §0.4: cheap rejections come first and every step fails closed. These pin the
 * precedence between steps, so a reordering of the pipeline shows up as a failing test.
 */
const ISS = 'https://idp.example.test'
const PUBLIC = 'https://mcp.example.test'

async function setup() {
  const key = await generateTestKey('ES256')
  const jwks = await startJwks([key])
  onTestFinished(() => jwks.close())
  const backend = await startNonValidatingBackend()
  onTestFinished(() => backend.close())
  const gw = await startTestGateway({
    ...oneServer(backend.url, {}, 'weather'),
    origins: ['https://app.example.test'],
    limits: { maxBodyBytes: 4096 },
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
  })
  const valid = await mintToken(claimsFor(ISS, `${PUBLIC}/mcp/weather`), { key })
  return { gw, backend, jwks, valid, url: gw.mcpUrl('weather') }
}

describe('check order', () => {
  it('no token + header/body mismatch → 401, not -32020 (authentication before the body is read)', async () => {
    const { backend, url, jwks } = await setup()
    const res = await rawPost(
      url,
      mcpBody('tools/call', { name: 'delete_all' }),
      mcpHeaders('tools/call', 'read_file'),
    )
    expect(res.status).toBe(401)
    expect(res.headers['www-authenticate']).toContain('resource_metadata=')
    expect(backend.requests).toHaveLength(0)
    expect(jwks.hits).toBe(0)
  })

  it('bad Origin + bad token → 403 for the Origin, before any token work', async () => {
    const { backend, url, jwks } = await setup()
    const res = await rawPost(url, mcpBody('tools/list'), {
      ...mcpHeaders('tools/list'),
      origin: 'https://evil.example',
      authorization: 'Bearer not.a.jwt',
    })
    expect(res.status).toBe(403)
    expect(res.headers['x-mcp-gateway-error']).toBe('origin_not_allowed')
    expect(backend.requests).toHaveLength(0)
    expect(jwks.hits).toBe(0)
  })

  it('oversized Content-Length + no token → 413 without reading the body', async () => {
    const { gw, backend } = await setup()
    const res = await sendRaw(gw.port, [
      httpHead('POST', '/mcp/weather', [
        ['host', 'x'],
        ['content-type', 'application/json'],
        ['content-length', '10737418240'],
      ]),
    ])
    expect(res.status).toBe(413)
    expect(res.headers.connection).toBe('close')
    expect(backend.requests).toHaveLength(0)
  })

  it('a valid token + header/body mismatch → 400 / -32020 and nothing forwarded', async () => {
    const { backend, url, valid } = await setup()
    const res = await rawPost(url, mcpBody('tools/call', { name: 'delete_all' }, 5), {
      ...mcpHeaders('tools/call', 'read_file'),
      authorization: `Bearer ${valid}`,
    })
    expect(res.status).toBe(400)
    expect(res.response()).toMatchObject({ id: 5, error: { code: -32020 } })
    expect(backend.requests).toHaveLength(0)
  })
})
