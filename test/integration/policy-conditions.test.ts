import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  connectClient,
  connectLegacyClient,
  mcpBody,
  mcpHeaders,
  mcpPost,
  rawPost,
} from '../helpers/clients.js'
import { startTestGateway, type TestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer, type SdkTestServer } from '../helpers/sdk-servers.js'
import { claimsFor, generateTestKey, mintToken, startJwks } from '../helpers/tokens.js'

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'

// The two examples of docs/policy.md §Conditions, exactly as written there.
const POLICY = String.raw`
rules:
  - name: analysts-query-analytics
    when: { claims: { groups: analysts } }
    servers: [warehouse]
    allow:
      tools: ["run_query"]
    if: 'args.database == "analytics" && !args.sql.matches("(?i)\\b(drop|delete|update)\\b")'
  - name: mail
    servers: [warehouse]
    allow:
      tools: ["send_email"]
  - name: mail-inside-only
    servers: ["*"]
    deny: { tools: ["send_email"] }
    unless: 'args.to.all(a, a.endsWith("@example.com"))'
`

function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-policy-conditions-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

/** The arguments of every tools/call the backend received. */
function argsSeen(server: SdkTestServer): unknown[] {
  return server
    .calls('tools/call')
    .map((r) => (r.json() as { params: { arguments?: unknown } }).params.arguments)
}

function audits(gw: TestGateway): Record<string, unknown>[] {
  return gw.logs.filter((l) => l.audit === true)
}

async function setup(trustHeaders: boolean, rules = POLICY) {
  const key = await generateTestKey('ES256')
  const jwks = await closing(startJwks([key]))
  const server = await closing(startSdkServer({ extraTools: ['run_query', 'send_email'] }))
  const gw = await startTestGateway(
    {
      auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
      policies: '.',
      servers: { warehouse: { upstreams: [{ url: server.url }], trustHeaders } },
      virtualServers: { all: { members: ['warehouse'] } },
    },
    { dir: policyDir(rules) },
  )
  const token = (server: string, groups: string[]) =>
    mintToken(claimsFor(ISS, `${PUBLIC}/mcp/${server}`, { sub: 'ann', groups }), { key })
  return { server, gw, token }
}

/** What these tests use of either era's official client. */
interface EraClient {
  listTools(): Promise<{ tools: { name: string }[] }>
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>
  getPrompt(params: { name: string; arguments: Record<string, string> }): Promise<unknown>
  complete(params: {
    ref: { type: 'ref/prompt'; name: string }
    argument: { name: string; value: string }
  }): Promise<unknown>
  readResource(params: { uri: string }): Promise<unknown>
  close(): Promise<void>
}

const ERAS: ReadonlyArray<readonly [string, (url: string, auth: string) => Promise<EraClient>]> = [
  ['2026-07-28', (url, auth) => connectClient(url, { auth })],
  ['2025-11-25', (url, auth) => connectLegacyClient(url, { auth })],
]

const TRUST = [
  ['bodies verified', false],
  ['trustHeaders: true', true],
] as const

describe.each(ERAS)('conditions with the official client, %s', (_era, connect) => {
  describe.each(TRUST)('%s', (_label, trustHeaders) => {
    it('the backend sees only the calls whose conditions allow them', async () => {
      const { server, gw, token } = await setup(trustHeaders)
      const client = await closing(
        connect(gw.mcpUrl('warehouse'), await token('warehouse', ['analysts'])),
      )
      // Lists are judged on names: a tool allowed only under a condition is listed.
      const { tools } = await client.listTools()
      expect(tools.map((t) => t.name).sort()).toEqual(['run_query', 'send_email'])
      const call = (name: string, args: Record<string, unknown>) =>
        client.callTool({ name, arguments: args })
      const refused = (name: string) => ({
        code: -32602,
        message: expect.stringContaining(`Unknown tool: ${name}`),
      })
      await call('run_query', { database: 'analytics', sql: 'select * from events' })
      await expect(call('run_query', { database: 'sales', sql: 'select 1' })).rejects.toMatchObject(
        refused('run_query'),
      )
      await expect(
        call('run_query', { database: 'analytics', sql: 'SELECT 1; Drop TABLE events' }),
      ).rejects.toMatchObject(refused('run_query'))
      // No sql at all: the condition cannot be evaluated, and that denies.
      await expect(call('run_query', { database: 'analytics' })).rejects.toMatchObject(
        refused('run_query'),
      )
      await call('send_email', { to: ['a@example.com', 'b@example.com'] })
      await expect(
        call('send_email', { to: ['a@example.com', 'x@elsewhere.test'] }),
      ).rejects.toMatchObject(refused('send_email'))
      expect(argsSeen(server)).toEqual([
        { database: 'analytics', sql: 'select * from events' },
        { to: ['a@example.com', 'b@example.com'] },
      ])
      const calls = audits(gw).filter((a) => a.method === 'tools/call')
      expect(calls.map((a) => [a.decision, a.rule, a.reason])).toEqual([
        ['allow', 'analysts-query-analytics', 'allow_rule'],
        ['deny', null, 'default_deny'],
        ['deny', null, 'default_deny'],
        ['deny', 'analysts-query-analytics', 'condition_error'],
        ['allow', 'mail', 'allow_rule'],
        ['deny', 'mail-inside-only', 'deny_rule'],
      ])
      expect(calls[1]?.conditions).toEqual([
        { rule: 'analysts-query-analytics', kind: 'if', value: false },
      ])
      expect(calls[3]?.conditions).toEqual([
        { rule: 'analysts-query-analytics', kind: 'if', error: 'field not found: sql' },
      ])
      expect(calls[5]?.conditions).toEqual([
        { rule: 'mail-inside-only', kind: 'unless', value: false },
      ])
    })
  })
})

const NAMED = `${POLICY}
  - name: summarize-public
    servers: [warehouse]
    allow: { prompts: ["summarize"] }
    if: 'has(args.value) || args.topic != "salaries"'
  - name: docs-but-the-changelog
    servers: [warehouse]
    allow: { resources: ["docs://*"] }
    unless: 'target == "docs://changelog"'
`

/** What the backend was asked for: prompt names with their topic, URIs, completion values. */
function seen(server: SdkTestServer): unknown[] {
  return server.requests
    .filter((r) => r.rpcMethod !== undefined && r.rpcMethod !== 'server/discover')
    .filter((r) => ['prompts/get', 'resources/read', 'completion/complete'].includes(r.rpcMethod!))
    .map((r) => {
      const p = (r.json() as { params: Record<string, unknown> }).params
      return [r.rpcMethod, p['name'] ?? p['uri'] ?? p['argument']]
    })
}

describe.each(ERAS)('conditions on prompts, resources and completions, %s', (_era, connect) => {
  it('prompts/get and completion/complete read arguments, resources/read the URI', async () => {
    const { server, gw, token } = await setup(true, NAMED)
    const auth = await token('warehouse', [])
    const client = await closing(connect(gw.mcpUrl('warehouse'), auth))
    await client.getPrompt({ name: 'summarize', arguments: { topic: 'caching' } })
    await expect(
      client.getPrompt({ name: 'summarize', arguments: { topic: 'salaries' } }),
    ).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Unknown prompt: summarize'),
    })
    await client.complete({
      ref: { type: 'ref/prompt', name: 'summarize' },
      argument: { name: 'topic', value: 'c' },
    })
    await client.readResource({ uri: 'docs://readme' })
    await expect(client.readResource({ uri: 'docs://changelog' })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Resource not found: docs://changelog'),
    })
    expect(seen(server)).toEqual([
      ['prompts/get', 'summarize'],
      ['completion/complete', { name: 'topic', value: 'c' }],
      ['resources/read', 'docs://readme'],
    ])
    const judged = audits(gw).filter((a) => a.method !== 'tools/call')
    expect(judged.map((a) => [a.method, a.decision, a.conditions])).toEqual([
      ['prompts/get', 'allow', [{ rule: 'summarize-public', kind: 'if', value: true }]],
      ['prompts/get', 'deny', [{ rule: 'summarize-public', kind: 'if', value: false }]],
      ['completion/complete', 'allow', [{ rule: 'summarize-public', kind: 'if', value: true }]],
      [
        'resources/read',
        'allow',
        [{ rule: 'docs-but-the-changelog', kind: 'unless', value: false }],
      ],
      ['resources/read', 'deny', [{ rule: 'docs-but-the-changelog', kind: 'unless', value: true }]],
    ])
  })
})

describe('conditions on the wire', () => {
  it('a denial is the in-band unknown-tool answer and the backend sees nothing', async () => {
    const { server, gw, token } = await setup(true)
    const auth = await token('warehouse', ['analysts'])
    const res = await mcpPost(
      gw.mcpUrl('warehouse'),
      'tools/call',
      { name: 'run_query', arguments: { database: 'sales', sql: 'select 1' } },
      { id: 41, auth },
    )
    expect(res.status).toBe(200)
    expect(res.text).toBe(
      '{"jsonrpc":"2.0","id":41,"error":{"code":-32602,"message":"Unknown tool: run_query"}}',
    )
    expect(server.calls('tools/call')).toHaveLength(0)
  })

  it('an integer beyond 2^53 in the arguments denies, never rounds', async () => {
    const rules = `${POLICY}
  - name: small-limits
    servers: [warehouse]
    allow: { tools: ["get_alerts"] }
    if: 'args.limit < 9007199254740993.0'
`
    const { server, gw, token } = await setup(true, rules)
    const auth = await token('warehouse', [])
    // The number goes into the text as written: a JavaScript number could not hold it.
    const body = JSON.stringify(
      mcpBody('tools/call', { name: 'get_alerts', arguments: { limit: 0 } }),
    )
    const text = (n: string) => body.replace('"limit":0', `"limit":${n}`)
    const headers = { ...mcpHeaders('tools/call', 'get_alerts'), authorization: `Bearer ${auth}` }
    // 9007199254740993 reads as 9007199254740992 in JavaScript, which is below the limit.
    const big = await rawPost(gw.mcpUrl('warehouse'), text('9007199254740993'), headers)
    expect(big.text).toContain('Unknown tool: get_alerts')
    expect(server.calls('tools/call')).toHaveLength(0)
    expect(audits(gw).at(-1)?.conditions).toEqual([
      {
        rule: 'small-limits',
        kind: 'if',
        error: 'a number beyond ±(2^53 - 1) cannot be compared exactly',
      },
    ])
    const small = await rawPost(gw.mcpUrl('warehouse'), text('5'), headers)
    expect(small.status).toBe(200)
    expect(small.text).not.toContain('Unknown tool')
    expect(server.calls('tools/call')).toHaveLength(1)
  })

  it.each([
    // Go's encoding/json takes `Database` for `database` and keeps the last; the condition read
    // the exact key. Case folding also maps the long s and the Kelvin sign onto ASCII letters.
    ['a case variant', '"database":"analytics","Database":"sales"', 'case_variant_key'],
    ['a folded letter', '"database":"analytics","databaſe":"sales"', 'case_variant_key'],
    // A C reader ends the key at U+0000.
    ['a key cut at NUL', '"database":"analytics","database\\u0000x":"sales"', 'case_variant_key'],
    // Duplicates deep inside the arguments: first-key-wins readers run with the other value.
    [
      'a nested duplicate',
      '"database":"analytics","opts":{"db":"sales","db":"analytics"}',
      'duplicate_key',
    ],
  ])(
    'arguments that another reader reads otherwise (%s) are refused, not judged',
    async (_, members, reason) => {
      for (const trustHeaders of [false, true]) {
        const { server, gw, token } = await setup(trustHeaders)
        const body = JSON.stringify(
          mcpBody('tools/call', { name: 'run_query', arguments: { sql: 'select 1' } }, 7),
        ).replace('"sql":"select 1"', `"sql":"select 1",${members}`)
        const headers = mcpHeaders('tools/call', 'run_query')
        for (const endpoint of ['warehouse', 'all']) {
          const authorization = `Bearer ${await token(endpoint, ['analysts'])}`
          const res = await rawPost(gw.mcpUrl(endpoint), body, { ...headers, authorization })
          expect(res.status, `${endpoint} trustHeaders=${trustHeaders}`).toBe(400)
          expect(res.headers['x-mcp-gateway-error']).toBe(reason)
          expect(res.json()).toMatchObject({ id: 7, error: { data: { reason } } })
        }
        expect(server.calls('tools/call')).toHaveLength(0)
        // The same keys without the look-alike are judged and allowed.
        const plain = body.replace(`,${members}`, ',"database":"analytics"')
        const authorization = `Bearer ${await token('warehouse', ['analysts'])}`
        const allowed = await rawPost(gw.mcpUrl('warehouse'), plain, { ...headers, authorization })
        expect(allowed.status).toBe(200)
        expect(server.calls('tools/call')).toHaveLength(1)
      }
    },
  )

  it("a virtual server judges its member's rules once, on the arguments the member receives", async () => {
    for (const trustHeaders of [false, true]) {
      const { server, gw, token } = await setup(trustHeaders)
      const auth = await token('all', ['analysts'])
      const url = gw.mcpUrl('all')
      const client = await closing(connectClient(url, { auth }))
      // The list teaches the virtual server who serves what, so a header-trusting member's calls
      // could be routed on their headers alone: a conditional rule must stop that.
      await client.listTools()
      await client.callTool({ name: 'run_query', arguments: { database: 'analytics', sql: 'x' } })
      await expect(
        client.callTool({ name: 'send_email', arguments: { to: ['x@elsewhere.test'] } }),
      ).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining('Unknown tool: send_email'),
      })
      expect(argsSeen(server)).toEqual([{ database: 'analytics', sql: 'x' }])
      const calls = audits(gw).filter((a) => a.method === 'tools/call')
      expect(calls.map((a) => [a.server, a.decision, a.rule])).toEqual([
        ['warehouse', 'allow', 'analysts-query-analytics'],
        ['warehouse', 'deny', 'mail-inside-only'],
      ])
    }
  })

  it('a condition that does not compile is a policy error naming file, rule and column', async () => {
    const rules = `
rules:
  - name: fine
    servers: [warehouse]
    allow: { tools: ["*"] }
  - name: broken
    servers: [warehouse]
    allow: { tools: ["run_query"] }
    if: 'args.database == "analytics" && arg.sql != ""'
`
    await expect(setup(false, rules)).rejects.toThrow(
      'main.yaml rules[1].if: column 33: undeclared reference to "arg"',
    )
  })
})
