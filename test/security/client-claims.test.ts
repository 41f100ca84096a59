import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mcpPost } from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  startJwks,
  type JwksServer,
  type TestKey,
} from '../helpers/tokens.js'

/**
 * A token's client application is its `azp`, else its `client_id`, and only a non-empty string
 * names one (docs/auth.md §Client applications). A claim of any other JSON type must name no
 * client: a present `azp` that is not one never falls back to `client_id`, and an empty string is
 * no client even for `clients: ["*"]`. Checked through the gateway with signed tokens, for
 * `servers.<name>.clients` (403 before the body is read) and policy `when.clients` (the call is
 * denied in band); neither backend sees a thing.
 */

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const CLIENT = 'payroll-web'

/** Every JSON type that is not a non-empty string. */
const NOT_A_CLIENT: readonly [string, unknown][] = [
  ['null', null],
  ['0', 0],
  ['a number', 7],
  ['true', true],
  ['false', false],
  ['an empty object', {}],
  ['an object naming the client', { id: CLIENT }],
  ['an empty array', []],
  ['an array of the client', [CLIENT]],
  ['the empty string', ''],
]

const POLICY = [
  'rules:',
  '  - { name: payroll, servers: [payroll, anyone], allow: { tools: ["*"] } }',
  '  - name: ledger-for-payroll-web',
  '    servers: [ledger]',
  `    when: { clients: [${CLIENT}] }`,
  '    allow: { tools: ["*"] }',
  '  - name: ledger-for-any-client',
  '    servers: [ledger]',
  '    when: { clients: ["*"] }',
  '    allow: { tools: ["get_alerts"] }',
].join('\n')

let key: TestKey
let jwks: JwksServer
let gated: SdkTestServer
let ruled: SdkTestServer
let gw: TestGateway
let dir: string

beforeAll(async () => {
  key = await generateTestKey('ES256')
  jwks = await startJwks([key])
  ;[gated, ruled] = await Promise.all([startSdkServer(), startSdkServer()])
  dir = mkdtempSync(join(tmpdir(), 'mcp-edge-client-claims-'))
  writeFileSync(join(dir, 'main.yaml'), POLICY)
  gw = await startTestGateway(
    {
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      policies: '.',
      servers: {
        payroll: { upstreams: [{ url: gated.url }], clients: [CLIENT] },
        anyone: { upstreams: [{ url: gated.url }], clients: ['*'] },
        ledger: { upstreams: [{ url: ruled.url }] },
      },
    },
    { dir, autoClose: false },
  )
})

afterAll(async () => {
  await gw.close(200)
  await Promise.all([gated.close(), ruled.close(), jwks.close()])
  rmSync(dir, { recursive: true, force: true })
})

const tokenFor = (server: string, claims: Record<string, unknown>): Promise<string> =>
  mintToken(claimsFor(ISS, `${PUBLIC}/mcp/${server}`, claims), { key })

/** servers.<name>.clients refuses the token: 403 client_not_allowed, id null, nothing forwarded. */
async function expectRefused(server: string, claims: Record<string, unknown>): Promise<void> {
  const before = gated.requests.length
  const res = await mcpPost(
    gw.mcpUrl(server),
    'tools/list',
    {},
    {
      auth: await tokenFor(server, claims),
      id: 17,
    },
  )
  expect(res.status, JSON.stringify(claims)).toBe(403)
  expect(res.headers['x-mcp-gateway-error']).toBe('client_not_allowed')
  const body = res.json() as { id: unknown; error: { code: number; data: { reason: string } } }
  // Refused before the body is read (docs/auth.md §Client applications): no id to echo.
  expect(body.id).toBe(null)
  expect(body.error.code).toBe(-31003)
  expect(body.error.data.reason).toBe('client_not_allowed')
  expect(gated.requests.length).toBe(before)
}

/** when.clients does not match: the call is denied in band with its id, nothing forwarded. */
async function expectDenied(claims: Record<string, unknown>, tool: string): Promise<void> {
  const res = await mcpPost(
    gw.mcpUrl('ledger'),
    'tools/call',
    { name: tool, arguments: {} },
    {
      auth: await tokenFor('ledger', claims),
      id: 23,
    },
  )
  expect(res.status, JSON.stringify(claims)).toBe(200)
  const answer = res.response()
  expect(answer.id).toBe(23)
  expect(answer.error?.code).toBe(-32602)
  expect(ruled.calls('tools/call')).toHaveLength(0)
}

describe.each(NOT_A_CLIENT)('a client claim that is %s', (_, value) => {
  it('as azp names no client, even next to a matching client_id', async () => {
    const claims = { azp: value, client_id: CLIENT }
    await expectRefused('payroll', claims)
    await expectRefused('anyone', claims)
    await expectDenied(claims, 'get_forecast')
    await expectDenied(claims, 'get_alerts')
  })

  it('as client_id (no azp) names no client', async () => {
    const claims = { client_id: value }
    await expectRefused('payroll', claims)
    await expectRefused('anyone', claims)
    await expectDenied(claims, 'get_forecast')
    await expectDenied(claims, 'get_alerts')
  })

  it('as client_id next to a valid azp: azp decides', async () => {
    const claims = { azp: CLIENT, client_id: value }
    const res = await mcpPost(
      gw.mcpUrl('payroll'),
      'tools/list',
      {},
      {
        auth: await tokenFor('payroll', claims),
      },
    )
    expect(res.status).toBe(200)
    expect(res.response().result).toBeDefined()
  })
})

describe('a client named by a string', () => {
  it.each([[{ azp: CLIENT }], [{ client_id: CLIENT }], [{ azp: CLIENT, client_id: 'other' }]])(
    '%j is admitted by clients: and when.clients',
    async (claims) => {
      const listed = await mcpPost(
        gw.mcpUrl('payroll'),
        'tools/list',
        {},
        {
          auth: await tokenFor('payroll', claims),
        },
      )
      expect(listed.status).toBe(200)
      const before = ruled.calls('tools/call').length
      const called = await mcpPost(
        gw.mcpUrl('ledger'),
        'tools/call',
        { name: 'get_forecast', arguments: { city: 'Oslo' } },
        { auth: await tokenFor('ledger', claims), id: 5 },
      )
      expect(called.status).toBe(200)
      expect(called.response().error).toBeUndefined()
      expect(ruled.calls('tools/call')).toHaveLength(before + 1)
      ruled.requests.length = 0
    },
  )

  it('a present azp of another client decides over a matching client_id', async () => {
    await expectRefused('payroll', { azp: 'other-app', client_id: CLIENT })
    await expectDenied({ azp: 'other-app', client_id: CLIENT }, 'get_forecast')
  })
})
