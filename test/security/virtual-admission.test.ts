import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { mcpBody, mcpHeaders, mcpPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import { streamOf } from '../helpers/streams.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

/**
 * A virtual server's member requests are admitted by the member's own endpoint (endpoint/admit.ts):
 * what the member's endpoint refuses, the virtual server refuses too, with the same status and
 * reason, audited under the member's name, and the member receives nothing. One member `weather`
 * with resource `scopes:` and no `policies:`; a virtual server `desk` over it; the token holds
 * only `mcp` (docs/virtual-servers.md §Policy).
 */

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const CHALLENGE = (endpoint: string): string =>
  `Bearer error="insufficient_scope", scope="mcp weather:admin", resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp/${endpoint}"`

interface Setup {
  readonly gw: TestGateway
  readonly backend: SdkTestServer
  token(endpoint: string, scope?: string): Promise<string>
}

async function setup(weather: Record<string, unknown> = {}): Promise<Setup> {
  const key = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const backend = await closing(startSdkServer())
  const gw = await startTestGateway({
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
    servers: {
      weather: {
        upstreams: [{ url: backend.url }],
        requiredScopes: ['mcp'],
        scopes: { resources: { 'docs://readme': ['weather:admin'] } },
        ...weather,
      },
    },
    virtualServers: { desk: { members: ['weather'], prefix: 'never' } },
  })
  return {
    gw,
    backend,
    token: (endpoint, scope = 'mcp') =>
      mintToken(claimsFor(ISS, `${PUBLIC}/mcp/${endpoint}`, { scope }), { key }),
  }
}

/** What the backend received of `method` after `since` requests. */
function sent(backend: SdkTestServer, method: string, since: number): string[] {
  return backend.requests
    .slice(since)
    .filter((r) => r.rpcMethod === method)
    .map((r) => r.body.toString('utf8'))
}

const audits = (gw: TestGateway) => gw.logs.filter((l) => l.audit === true)

async function listen(url: string, auth: string, uris: readonly string[], id: number) {
  const params = { notifications: { resourceSubscriptions: uris } }
  const res = await request(url, {
    method: 'POST',
    headers: { ...mcpHeaders('subscriptions/listen'), authorization: `Bearer ${auth}` },
    body: JSON.stringify(mcpBody('subscriptions/listen', params, id)),
  })
  return streamOf(res)
}

describe('virtual server member admission', () => {
  it('refuses a dot-segment resources/read with 400 through the virtual server as directly', async () => {
    const { gw, backend, token } = await setup()
    const uri = 'docs://pages/../readme'
    const direct = await mcpPost(
      gw.mcpUrl('weather'),
      'resources/read',
      { uri },
      {
        auth: await token('weather'),
        id: 1,
      },
    )
    expect(direct.status).toBe(400)
    expect(direct.json()).toMatchObject({
      id: 1,
      error: { data: { reason: 'uri_not_normalized' } },
    })
    const before = backend.requests.length
    const viaDesk = await mcpPost(
      gw.mcpUrl('desk'),
      'resources/read',
      { uri },
      {
        auth: await token('desk'),
        id: 3,
      },
    )
    expect(viaDesk.status).toBe(400)
    expect(viaDesk.json()).toMatchObject({
      id: 3,
      error: { data: { reason: 'uri_not_normalized' } },
    })
    expect(sent(backend, 'resources/read', before)).toEqual([])
  })

  it('refuses a dot-segment completion/complete ref/resource through the virtual server', async () => {
    const { gw, backend, token } = await setup()
    const auth = await token('desk')
    // The member's lists are known first, so the template routes.
    await mcpPost(gw.mcpUrl('desk'), 'resources/templates/list', {}, { auth, id: 1 })
    const before = backend.requests.length
    const params = {
      ref: { type: 'ref/resource', uri: 'docs://pages/../{name}' },
      argument: { name: 'name', value: 'r' },
    }
    const res = await mcpPost(gw.mcpUrl('desk'), 'completion/complete', params, { auth, id: 2 })
    // The template routes to `weather` (it serves docs://pages/{name}); its admission refuses it.
    expect(res.status).toBe(400)
    expect(res.json()).toMatchObject({ id: 2, error: { data: { reason: 'uri_not_normalized' } } })
    expect(sent(backend, 'completion/complete', before)).toEqual([])
  })

  it('refuses a resources/read the token has no scope for with the same 403 and audit line', async () => {
    const { gw, backend, token } = await setup()
    await mcpPost(gw.mcpUrl('desk'), 'resources/list', {}, { auth: await token('desk'), id: 0 })
    const before = backend.requests.length
    const res = await mcpPost(
      gw.mcpUrl('desk'),
      'resources/read',
      { uri: 'docs://readme' },
      {
        auth: await token('desk'),
        id: 5,
      },
    )
    expect(res.status).toBe(403)
    expect(res.headers['www-authenticate']).toBe(CHALLENGE('desk'))
    expect(res.json()).toMatchObject({ id: 5, error: { data: { reason: 'insufficient_scope' } } })
    expect(sent(backend, 'resources/read', before)).toEqual([])
    expect(audits(gw).at(-1)).toMatchObject({
      server: 'weather',
      target: 'docs://readme',
      reason: 'insufficient_scope',
    })
  })

  it('refuses a listen on a resource without its scope: 403 and audited, as directly', async () => {
    const { gw, backend, token } = await setup()
    const direct = await listen(gw.mcpUrl('weather'), await token('weather'), ['docs://readme'], 1)
    expect(direct.status).toBe(403)
    expect(direct.headers['www-authenticate']).toBe(CHALLENGE('weather'))
    expect(await direct.json()).toMatchObject({
      id: 1,
      error: { data: { reason: 'insufficient_scope' } },
    })
    const auth = await token('desk')
    // The virtual server learns who serves docs://readme from the member's list.
    await mcpPost(gw.mcpUrl('desk'), 'resources/list', {}, { auth, id: 2 })
    const before = backend.requests.length
    const auditsBefore = audits(gw).length
    const viaDesk = await listen(gw.mcpUrl('desk'), auth, ['docs://readme'], 3)
    expect(viaDesk.status).toBe(403)
    expect(viaDesk.headers['www-authenticate']).toBe(CHALLENGE('desk'))
    expect(await viaDesk.json()).toMatchObject({
      id: 3,
      error: { data: { reason: 'insufficient_scope' } },
    })
    // Nothing reached the member: no listen stream, not even its capability read.
    expect(backend.requests.slice(before)).toEqual([])
    expect(audits(gw).slice(auditsBefore)).toEqual([
      expect.objectContaining({
        server: 'weather',
        method: 'subscriptions/listen',
        target: 'docs://readme',
        reason: 'insufficient_scope',
      }),
    ])
  })

  it('refuses a listen on a dot-segment URI with 400 through the virtual server as directly', async () => {
    const { gw, backend, token } = await setup({
      scopes: { resources: { 'docs://pages/*': ['mcp'] } },
    })
    const uri = 'docs://pages/../readme'
    const direct = await listen(gw.mcpUrl('weather'), await token('weather'), [uri], 1)
    expect(direct.status).toBe(400)
    expect(await direct.json()).toMatchObject({
      id: 1,
      error: { data: { reason: 'uri_not_normalized' } },
    })
    const auth = await token('desk')
    await mcpPost(gw.mcpUrl('desk'), 'resources/templates/list', {}, { auth, id: 2 })
    const before = backend.requests.length
    const viaDesk = await listen(gw.mcpUrl('desk'), auth, [uri], 3)
    expect(viaDesk.status).toBe(400)
    expect(await viaDesk.json()).toMatchObject({
      id: 3,
      error: { data: { reason: 'uri_not_normalized' } },
    })
    expect(backend.requests.slice(before)).toEqual([])
  })

  it('opens a listen the token has the scope for, through the virtual server', async () => {
    const { gw, backend, token } = await setup()
    const auth = await token('desk', 'mcp weather:admin')
    await mcpPost(gw.mcpUrl('desk'), 'resources/list', {}, { auth, id: 1 })
    const stream = await listen(gw.mcpUrl('desk'), auth, ['docs://readme'], 2)
    expect(stream.status).toBe(200)
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/)
    await expect.poll(() => stream.text()).toContain('notifications/subscriptions/acknowledged')
    await expect.poll(() => sent(backend, 'subscriptions/listen', 0).length).toBe(1)
    stream.close()
  })
})
