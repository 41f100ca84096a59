import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { InsufficientScopeError } from '@modelcontextprotocol/client'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectClient, connectLegacyClient, mcpPost, rawPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  startJwks,
  type TestKey,
} from '../helpers/tokens.js'

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const prm = (endpoint: string): string =>
  `${PUBLIC}/.well-known/oauth-protected-resource/mcp/${endpoint}`
const aud = (endpoint: string): string => `${PUBLIC}/mcp/${endpoint}`

/** `delete_*` needs weather:admin on top of what every tool needs (`*`: weather:read). */
const SCOPES = { tools: { 'delete_*': ['weather:admin'], '*': ['weather:read'] } }
const ADMIN_CHALLENGE = (endpoint: string): string =>
  `Bearer error="insufficient_scope", scope="mcp weather:admin weather:read", resource_metadata="${prm(endpoint)}"`

interface Setup {
  readonly gw: TestGateway
  readonly backend: SdkTestServer
  token(scope: string, extra?: Record<string, unknown>, endpoint?: string): Promise<string>
}

async function setup(
  weather: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  dir?: string,
): Promise<Setup> {
  const key: TestKey = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const backend = await closing(
    startSdkServer({ cacheHints: { 'tools/list': { ttlMs: 60_000, cacheScope: 'public' } } }),
  )
  const gw = await startTestGateway(
    {
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      servers: {
        weather: {
          upstreams: [{ url: backend.url }],
          requiredScopes: ['mcp'],
          scopes: SCOPES,
          ...weather,
        },
      },
      ...extra,
    },
    dir === undefined ? {} : { dir },
  )
  return {
    gw,
    backend,
    token: (scope, claims = {}, endpoint = 'weather') =>
      mintToken(claimsFor(ISS, aud(endpoint), { scope, ...claims }), { key }),
  }
}

async function toolNames(url: string, auth: string): Promise<string[]> {
  const client = await closing(connectClient(url, { auth }))
  return (await client.listTools()).tools.map((t) => t.name)
}

async function legacyToolNames(url: string, auth: string): Promise<string[]> {
  const client = await closing(connectLegacyClient(url, { auth }))
  return (await client.listTools()).tools.map((t) => t.name)
}

/** The 403 of a tools/call the token lacks scopes for: exact challenge, id, reason. */
async function expectStepUp(url: string, auth: string, name: string, challenge: string) {
  const res = await mcpPost(url, 'tools/call', { name, arguments: {} }, { auth, id: 41 })
  expect(res.status).toBe(403)
  expect(res.headers['www-authenticate']).toBe(challenge)
  expect(res.headers['x-mcp-gateway-error']).toBe('insufficient_scope')
  const body = res.json() as { id: unknown; error: { code: number; data: { reason: string } } }
  expect(body.id).toBe(41)
  expect(body.error.code).toBe(-31003)
  expect(body.error.data.reason).toBe('insufficient_scope')
}

const READ_TOOLS = ['get_forecast', 'get_alerts', 'slow_forecast', 'confirm_action', 'whoami']

describe('scopes per tool', () => {
  it('403s a call its token lacks a scope for, naming every scope it needs; nothing is forwarded', async () => {
    const { gw, backend, token } = await setup()
    const url = gw.mcpUrl('weather')
    const reader = await token('mcp weather:read')
    await expectStepUp(url, reader, 'delete_station', ADMIN_CHALLENGE('weather'))
    // A tool that only `*` matches needs weather:read, and the challenge says so (and only that).
    await expectStepUp(
      url,
      await token('mcp'),
      'get_forecast',
      `Bearer error="insufficient_scope", scope="mcp weather:read", resource_metadata="${prm('weather')}"`,
    )
    expect(backend.calls('tools/call')).toHaveLength(0)
    // Each refusal is on the audit trail, with the caller, the target and the request id.
    const refusals = gw.logs.filter(
      (l) => l['audit'] === true && l['reason'] === 'insufficient_scope',
    )
    expect(refusals.map((l) => [l['target'], l['sub'], l['decision'], l['server']])).toEqual([
      ['delete_station', 'alice', 'deny', 'weather'],
      ['get_forecast', 'alice', 'deny', 'weather'],
    ])
    expect(refusals.every((l) => typeof l['requestId'] === 'string')).toBe(true)
    // The scope in the challenge is one the metadata advertises.
    const doc = await fetch(`${gw.url}/.well-known/oauth-protected-resource/mcp/weather`)
    expect(((await doc.json()) as { scopes_supported: string[] }).scopes_supported).toEqual([
      'mcp',
      'weather:admin',
      'weather:read',
    ])
  })

  it('without policies, judges methods only on servers with scopes', async () => {
    const key = await generateTestKey('ES256')
    const jwks = await closing(startJwks([key]))
    const backend = await closing(startSdkServer())
    const gw = await startTestGateway({
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      servers: {
        weather: { upstreams: [{ url: backend.url }], scopes: SCOPES },
        plain: { upstreams: [{ url: backend.url }] },
      },
    })
    const tokenFor = (endpoint: string) =>
      mintToken(claimsFor(ISS, aud(endpoint), { scope: 'weather:read' }), { key })
    // SECURITY: a method a lenient backend could take for tools/call is not passed unjudged.
    const odd = await mcpPost(
      gw.mcpUrl('weather'),
      'TOOLS/CALL',
      { name: 'delete_station' },
      {
        auth: await tokenFor('weather'),
      },
    )
    expect(odd.status).toBe(404)
    expect(backend.requests.filter((r) => r.rpcMethod === 'TOOLS/CALL')).toHaveLength(0)
    // A server without scopes (and no policies) is not judged: as before, it gets what it is sent.
    await mcpPost(gw.mcpUrl('plain'), 'x/custom', {}, { auth: await tokenFor('plain') })
    expect(backend.requests.filter((r) => r.rpcMethod === 'x/custom')).toHaveLength(1)
  })

  it('2026-07-28: the official client gets the challenge; a token with the scopes then calls', async () => {
    const { gw, backend, token } = await setup()
    const url = gw.mcpUrl('weather')
    const client = await closing(connectClient(url, { auth: await token('mcp weather:read') }))
    expect(
      (await client.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })).isError,
    ).not.toBe(true)
    // Without an OAuth provider to step up with, the client surfaces what it would ask for.
    const err: unknown = await client
      .callTool({ name: 'delete_station', arguments: { id: 'x' } })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InsufficientScopeError)
    const stepUp = err as InsufficientScopeError
    expect(stepUp.requiredScope).toBe('mcp weather:admin weather:read')
    expect(String(stepUp.resourceMetadataUrl)).toBe(prm('weather'))
    expect(backend.calls('tools/call')).toHaveLength(1)
    // The retry, with a token for every scope the challenge named.
    const admin = await closing(
      connectClient(url, { auth: await token(stepUp.requiredScope ?? '') }),
    )
    await admin.callTool({ name: 'delete_station', arguments: { id: 'x' } })
    expect(backend.calls('tools/call')).toHaveLength(2)
  })

  it('2025-11-25: the same 403 and the same lists', async () => {
    const { gw, backend, token } = await setup()
    const url = gw.mcpUrl('weather')
    const reader = await token('mcp weather:read')
    expect(await legacyToolNames(url, reader)).toEqual(READ_TOOLS)
    const client = await closing(connectLegacyClient(url, { auth: reader }))
    await expect(client.callTool({ name: 'delete_station', arguments: {} })).rejects.toThrow(
      /insufficient_scope/,
    )
    const raw = await rawPost(
      url,
      { jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'delete_station' } },
      {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        authorization: `Bearer ${reader}`,
      },
    )
    expect(raw.status).toBe(403)
    expect(raw.headers['www-authenticate']).toBe(ADMIN_CHALLENGE('weather'))
    expect((raw.json() as { id: unknown }).id).toBe('a')
    expect(backend.calls('tools/call')).toHaveLength(0)
    const admin = await token('mcp weather:read weather:admin')
    expect(await legacyToolNames(url, admin)).toContain('delete_station')
  })

  it('lists what the token can call by default, and everything with scopesInLists: stepUp', async () => {
    const hidden = await setup()
    const url = hidden.gw.mcpUrl('weather')
    expect(await toolNames(url, await hidden.token('mcp weather:read'))).toEqual(READ_TOOLS)
    expect(await toolNames(url, await hidden.token('mcp'))).toEqual([])
    expect(await toolNames(url, await hidden.token('mcp weather:read weather:admin'))).toContain(
      'delete_station',
    )
    const shown = await setup({ scopesInLists: 'stepUp' })
    const reader = await shown.token('mcp weather:read')
    expect(await toolNames(shown.gw.mcpUrl('weather'), reader)).toContain('delete_station')
    await expectStepUp(
      shown.gw.mcpUrl('weather'),
      reader,
      'delete_station',
      ADMIN_CHALLENGE('weather'),
    )
    expect(shown.backend.calls('tools/call')).toHaveLength(0)
  })

  it('prompts and resources: their own scopes, in calls and in lists, on both eras', async () => {
    const { gw, backend, token } = await setup({
      scopes: {
        prompts: { review: ['docs:review'] },
        resources: { 'docs://changelog': ['docs:history'], 'docs://pages/*': ['docs:pages'] },
      },
    })
    const url = gw.mcpUrl('weather')
    const plain = await token('mcp')
    const client = await closing(connectClient(url, { auth: plain }))
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(['summarize'])
    expect((await client.listResources()).resources.map((r) => r.uri)).toEqual(['docs://readme'])
    // A template is judged by its uriTemplate text, as policy's list view does.
    expect((await client.listResourceTemplates()).resourceTemplates).toEqual([])
    const legacy = await closing(connectLegacyClient(url, { auth: plain }))
    expect((await legacy.listPrompts()).prompts.map((p) => p.name)).toEqual(['summarize'])
    const review = await mcpPost(
      url,
      'prompts/get',
      { name: 'review', arguments: { page: 'a' } },
      {
        auth: plain,
        id: 5,
      },
    )
    expect(review.status).toBe(403)
    expect(review.headers['www-authenticate']).toBe(
      `Bearer error="insufficient_scope", scope="mcp docs:review", resource_metadata="${prm('weather')}"`,
    )
    const page = await mcpPost(
      url,
      'resources/read',
      { uri: 'docs://pages/intro' },
      { auth: plain },
    )
    expect(page.status).toBe(403)
    expect(page.headers['www-authenticate']).toMatch(/scope="mcp docs:pages"/)
    expect(backend.calls('prompts/get')).toHaveLength(0)
    expect(backend.calls('resources/read')).toHaveLength(0)
    const reader = await closing(
      connectClient(url, { auth: await token('mcp docs:history docs:pages docs:review') }),
    )
    await reader.readResource({ uri: 'docs://changelog' })
    await reader.getPrompt({ name: 'review', arguments: { page: 'intro' } })
    expect(backend.calls('resources/read')).toHaveLength(1)
    expect(backend.calls('prompts/get')).toHaveLength(1)
  })

  it('the cache never serves a list filtered for other scopes, in either order', async () => {
    const { gw, backend, token } = await setup({}, { cache: {} })
    const url = gw.mcpUrl('weather')
    const admin = await token('mcp weather:read weather:admin', { sub: 'root' })
    const reader = await token('mcp weather:read', { sub: 'root' })
    const list = async (auth: string) => {
      const res = await mcpPost(url, 'tools/list', {}, { auth })
      expect(res.status).toBe(200)
      const result = res.response().result as { tools: { name: string }[]; cacheScope?: string }
      return { names: result.tools.map((t) => t.name), scope: result.cacheScope }
    }
    expect((await list(admin)).names).toContain('delete_station')
    const filtered = await list(reader)
    expect(filtered.names).toEqual(READ_TOOLS)
    // Filtered by the token, the answer is no longer public for whoever stores it next.
    expect(filtered.scope).toBe('private')
    expect((await list(admin)).names).toContain('delete_station')
    expect((await list(reader)).names).toEqual(READ_TOOLS)
    // Served from the cache: the backend answered tools/list once.
    expect(backend.calls('tools/list')).toHaveLength(1)
  })

  it("a virtual server's member target needs the member's scopes; the 403 names the virtual endpoint", async () => {
    const { gw, backend, token } = await setup(
      {},
      { virtualServers: { desk: { members: ['weather'], prefix: 'never' } }, cache: {} },
    )
    const url = gw.mcpUrl('desk')
    const reader = await token('mcp weather:read', {}, 'desk')
    const lister = await token('mcp weather:read weather:admin', {}, 'desk')
    // The merged list is cached per member view: never one caller's scopes for another's.
    expect(await toolNames(url, lister)).toContain('delete_station')
    expect(await toolNames(url, reader)).toEqual(READ_TOOLS)
    expect(await toolNames(url, lister)).toContain('delete_station')
    expect(await legacyToolNames(url, reader)).toEqual(READ_TOOLS)
    await expectStepUp(url, reader, 'delete_station', ADMIN_CHALLENGE('desk'))
    const legacy = await closing(connectLegacyClient(url, { auth: reader }))
    await expect(legacy.callTool({ name: 'delete_station', arguments: {} })).rejects.toThrow(
      /insufficient_scope/,
    )
    expect(backend.calls('tools/call')).toHaveLength(0)
    const admin = await closing(
      connectClient(url, { auth: await token('mcp weather:read weather:admin', {}, 'desk') }),
    )
    await admin.callTool({ name: 'delete_station', arguments: { id: 'x' } })
    expect(backend.calls('tools/call')).toHaveLength(1)
  })
})

describe('client applications', () => {
  it('servers.<name>.clients: only tokens of those clients, azp else client_id; nothing forwarded', async () => {
    const { gw, backend, token } = await setup({ clients: ['ide-*'] })
    const url = gw.mcpUrl('weather')
    const all = 'mcp weather:read'
    const refused = await mcpPost(
      url,
      'tools/list',
      {},
      { auth: await token(all, { azp: 'web' }), id: 9 },
    )
    expect(refused.status).toBe(403)
    expect(refused.headers['www-authenticate']).toBeUndefined()
    expect(refused.headers['x-mcp-gateway-error']).toBe('client_not_allowed')
    const body = refused.json() as { id: unknown; error: { code: number; message: string } }
    // Refused before the body is read (docs/design/check-order.md step 6): no id to echo.
    expect(body.id).toBe(null)
    expect(body.error.code).toBe(-31003)
    expect(body.error.message).not.toMatch(/ide|web/)
    // A present azp decides, whatever client_id says.
    const mixed = await token(all, { azp: 'web', client_id: 'ide-vscode' })
    expect((await mcpPost(url, 'tools/list', {}, { auth: mixed })).status).toBe(403)
    expect((await mcpPost(url, 'tools/list', {}, { auth: await token(all) })).status).toBe(403)
    expect(backend.requests).toHaveLength(0)
    // Audited: the caller and the client it came with (none for the last token).
    const refusals = gw.logs.filter(
      (l) => l['audit'] === true && l['reason'] === 'client_not_allowed',
    )
    expect(refusals.map((l) => [l['client'], l['decision'], l['method']])).toEqual([
      ['web', 'deny', 'tools/list'],
      ['web', 'deny', 'tools/list'],
      [null, 'deny', 'tools/list'],
    ])
    expect(await toolNames(url, await token(all, { azp: 'ide-vscode' }))).toEqual(READ_TOOLS)
    expect(await legacyToolNames(url, await token(all, { client_id: 'ide-zed' }))).toEqual(
      READ_TOOLS,
    )
  })

  it('a virtual endpoint admits only clients every member admits', async () => {
    const { gw, backend, token } = await setup(
      { clients: ['ide', 'web'] },
      { virtualServers: { desk: { members: ['weather'] } } },
    )
    const url = gw.mcpUrl('desk')
    const scope = 'mcp weather:read'
    const refused = await mcpPost(
      url,
      'tools/list',
      {},
      { auth: await token(scope, { azp: 'cli' }, 'desk') },
    )
    expect(refused.status).toBe(403)
    expect(refused.headers['x-mcp-gateway-error']).toBe('client_not_allowed')
    expect(backend.requests).toHaveLength(0)
    expect(await toolNames(url, await token(scope, { azp: 'web' }, 'desk'))).toEqual(READ_TOOLS)
  })

  it('policy rules: when.clients allows a tool to one client application only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-clients-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(
      join(dir, 'main.yaml'),
      [
        'rules:',
        '  - { name: reads, servers: [weather], allow: { tools: ["get_*"] } }',
        '  - name: console-deletes',
        '    servers: [weather]',
        '    when: { clients: [console] }',
        '    allow: { tools: ["delete_*"] }',
      ].join('\n'),
    )
    const { gw, backend, token } = await setup({ scopes: {} }, { policies: '.' }, dir)
    const url = gw.mcpUrl('weather')
    const consoleToken = await token('mcp', { azp: 'console' })
    const other = await token('mcp', { azp: 'consoles' })
    expect(await toolNames(url, consoleToken)).toEqual([
      'get_forecast',
      'get_alerts',
      'delete_station',
    ])
    expect(await legacyToolNames(url, other)).toEqual(['get_forecast', 'get_alerts'])
    const denied = await mcpPost(url, 'tools/call', { name: 'delete_station' }, { auth: other })
    expect(denied.status).toBe(200)
    expect(denied.response().error?.code).toBe(-32602)
    expect(backend.calls('tools/call')).toHaveLength(0)
    const client = await closing(connectClient(url, { auth: consoleToken }))
    await client.callTool({ name: 'delete_station', arguments: { id: 'x' } })
    expect(backend.calls('tools/call')).toHaveLength(1)
    // The audit lines say which client application asked.
    const audited = gw.logs.filter((l) => l['audit'] === true && l['target'] === 'delete_station')
    expect(audited.map((l) => [l['client'], l['decision']])).toEqual([
      ['consoles', 'deny'],
      ['console', 'allow'],
    ])
  })
})
