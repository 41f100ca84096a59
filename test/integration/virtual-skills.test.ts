import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SkillsClient } from '@modelcontextprotocol/client/ext/skills'
import { describe, expect, it, onTestFinished } from 'vitest'
import * as z from 'zod'
import {
  connectClient,
  connectLegacyClient,
  mcpPost,
  type RawResponse,
} from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { closing } from '../helpers/lifecycle.js'
import { APP_MIME_TYPE, startAppsServer } from '../helpers/apps-server.js'
import { skillMd, startSkillsServer } from '../helpers/skills-server.js'

const Listed = z.looseObject({ skills: z.array(z.looseObject({ uri: z.string() })) })
const Any = z.looseObject({})

function policyDir(rules: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-vskills-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'main.yaml'), rules)
  return dir
}

/** Two members that both serve skill://refunds/SKILL.md, with different text. */
async function twoMembers(options: { prefix?: string; policies?: string } = {}) {
  const billing = await closing(
    startSkillsServer({
      name: 'billing',
      files: {
        'refunds/SKILL.md': skillMd('refunds', 'Billing refunds', '# Refunds by billing\n'),
        'refunds/examples/email.md': 'billing email\n',
        'ledger/SKILL.md': skillMd('ledger', 'Close the ledger'),
      },
    }),
  )
  const support = await closing(
    startSkillsServer({
      name: 'support',
      directoryRead: false,
      files: {
        'refunds/SKILL.md': skillMd('refunds', 'Support refunds', '# Refunds by support\n'),
        'refunds/examples/email.md': 'support email\n',
        'secrets/SKILL.md': skillMd('secrets', 'Rotate credentials'),
      },
    }),
  )
  const gw = await startTestGateway(
    {
      servers: {
        billing: { upstreams: [{ url: billing.url }] },
        support: { upstreams: [{ url: support.url }] },
      },
      virtualServers: {
        desk: { members: ['billing', 'support'], prefix: options.prefix ?? 'onCollision' },
      },
      ...(options.policies !== undefined && { policies: '.' }),
    },
    options.policies === undefined ? {} : { dir: policyDir(options.policies) },
  )
  return { billing, support, gw }
}

/** The skill URIs a `skills/list` at `url` answers. */
async function listedSkills(url: string): Promise<string[]> {
  const listed = await mcpPost(url, 'skills/list')
  return (listed.response().result as { skills: { uri: string }[] }).skills.map((s) => s.uri)
}

function expectUnknown(res: RawResponse, id: unknown, message: string): void {
  expect(res.status).toBe(200)
  expect(res.response()).toMatchObject({ id, error: { code: -32602, message } })
}

describe('skills through a virtual server (docs/virtual-servers.md §Skills and MCP Apps)', () => {
  it('lists two members’ same-URI skills under distinct URIs, each routed to its own member', async () => {
    const { billing, support, gw } = await twoMembers()
    const client = await closing(connectClient(gw.mcpUrl('desk')))
    const skills = new SkillsClient(client)
    expect(skills.supported).toBe(true)
    // support does not read directories: the merged capability is what both can do.
    expect(skills.directoryRead).toBe(false)
    const { skills: entries } = await skills.list()
    expect(entries.map((s) => s.uri).sort()).toEqual([
      'skill://billing/refunds/SKILL.md',
      'skill://ledger/SKILL.md',
      'skill://secrets/SKILL.md',
      'skill://support/refunds/SKILL.md',
    ])
    const supportRefunds = entries.find((s) => s.uri === 'skill://support/refunds/SKILL.md')
    expect(supportRefunds?.frontmatter.description).toBe('Support refunds')
    // Each skill and its files, read and verified, from its own member under its own URI.
    const b = await skills.get('skill://billing/refunds/SKILL.md')
    expect(b.skill.frontmatter.description).toBe('Billing refunds')
    expect((await skills.read(b.skill)).body).toContain('Refunds by billing')
    expect((await skills.read(b.skill, 'examples/email.md')).text).toBe('billing email\n')
    const s = await skills.get('skill://support/refunds/SKILL.md')
    expect((await skills.read(s.skill, 'examples/email.md')).text).toBe('support email\n')
    expect(
      billing.calls('skills/get').map((r) => (r.json() as { params: { uri: string } }).params.uri),
    ).toEqual(['skill://refunds/SKILL.md'])
    expect(support.calls('resources/read').at(-1)?.header('mcp-name')).toBe(
      'skill://refunds/examples/email.md',
    )
    // A skill only one member serves keeps its URI, and the unprefixed collision leads nowhere.
    expect((await skills.get('skill://ledger/SKILL.md')).skill.frontmatter.name).toBe('ledger')
    const before = billing.requests.length + support.requests.length
    expectUnknown(
      await mcpPost(
        gw.mcpUrl('desk'),
        'skills/get',
        { uri: 'skill://refunds/SKILL.md' },
        { id: 3 },
      ),
      3,
      'No skill is served at skill://refunds/SKILL.md',
    )
    expect(billing.requests.length + support.requests.length - before).toBeLessThanOrEqual(2) // a list refresh at most
    // A directory read goes to the member that serves the directory, answered in exposed URIs.
    const dir = await mcpPost(gw.mcpUrl('desk'), 'resources/directory/read', {
      uri: 'skill://billing/refunds',
    })
    const children = (dir.response().result as { resources: { uri: string }[] }).resources
    expect(children.map((c) => c.uri)).toEqual([
      'skill://billing/refunds/SKILL.md',
      'skill://billing/refunds/examples',
    ])
  })

  it('keeps a denied skill of one member invisible on every path, prefixed or not', async () => {
    const { support, gw } = await twoMembers({
      prefix: 'always',
      policies: `
rules:
  - name: skills
    servers: ["*"]
    allow: { skills: ["*"] }
  - name: no-secrets
    servers: [support]
    deny: { skills: ["skill://secrets/SKILL.md"] }
`,
    })
    const url = gw.mcpUrl('desk')
    const uris = await listedSkills(url)
    expect(uris.sort()).toEqual([
      'skill://billing/ledger/SKILL.md',
      'skill://billing/refunds/SKILL.md',
      'skill://support/refunds/SKILL.md',
    ])
    const before = support.calls('skills/get').length + support.calls('resources/read').length
    expectUnknown(
      await mcpPost(url, 'skills/get', { uri: 'skill://support/secrets/SKILL.md' }, { id: 4 }),
      4,
      'No skill is served at skill://support/secrets/SKILL.md',
    )
    expectUnknown(
      await mcpPost(url, 'resources/read', { uri: 'skill://support/secrets/SKILL.md' }, { id: 5 }),
      5,
      'Resource not found: skill://support/secrets/SKILL.md',
    )
    expect(support.calls('skills/get').length + support.calls('resources/read').length).toBe(before)
    // 2025-era framing: the v1 client sees the same merged listing and the same refusal.
    const legacy = await closing(connectLegacyClient(url))
    const l = await legacy.request({ method: 'skills/list', params: {} }, Listed)
    expect(l.skills.map((x) => x.uri).sort()).toEqual(uris.sort())
    await expect(
      legacy.request(
        { method: 'skills/get', params: { uri: 'skill://support/secrets/SKILL.md' } },
        Any,
      ),
    ).rejects.toMatchObject({ code: -32602 })
    const got = await legacy.request(
      { method: 'skills/get', params: { uri: 'skill://billing/refunds/SKILL.md' } },
      z.looseObject({
        skill: z.looseObject({
          uri: z.string(),
          resources: z.array(z.looseObject({ uri: z.string() })),
        }),
      }),
    )
    expect(got.skill.resources.map((r) => r.uri)).toEqual([
      'skill://billing/refunds/SKILL.md',
      'skill://billing/refunds/examples/email.md',
    ])
  })

  it('keeps a denied skill’s files and directories unknown through the virtual server too', async () => {
    const { billing, support, gw } = await twoMembers({
      prefix: 'always',
      policies: `
rules:
  - name: skills
    servers: ["*"]
    allow: { skills: ["*"] }
  - name: no-billing-refunds
    servers: [billing]
    deny: { skills: ["skill://refunds/SKILL.md"] }
`,
    })
    const url = gw.mcpUrl('desk')
    const uris = await listedSkills(url)
    expect(uris.sort()).toEqual([
      'skill://billing/ledger/SKILL.md',
      'skill://support/refunds/SKILL.md',
      'skill://support/secrets/SKILL.md',
    ])
    const reads = () =>
      ['skills/get', 'resources/read', 'resources/directory/read'].reduce(
        (n, m) => n + billing.calls(m).length,
        0,
      )
    const before = reads()
    expectUnknown(
      await mcpPost(url, 'skills/get', { uri: 'skill://billing/refunds/SKILL.md' }, { id: 1 }),
      1,
      'No skill is served at skill://billing/refunds/SKILL.md',
    )
    for (const uri of [
      'skill://billing/refunds/SKILL.md',
      'skill://billing/refunds/examples/email.md',
    ])
      expectUnknown(
        await mcpPost(url, 'resources/read', { uri }, { id: 2 }),
        2,
        `Resource not found: ${uri}`,
      )
    for (const uri of ['skill://billing/refunds', 'skill://billing/refunds/examples'])
      expectUnknown(
        await mcpPost(url, 'resources/directory/read', { uri }, { id: 3 }),
        3,
        `Resource not found: ${uri}`,
      )
    // 2025-era framing: the same refusal.
    const legacy = await closing(connectLegacyClient(url))
    await expect(
      legacy.request(
        {
          method: 'resources/read',
          params: { uri: 'skill://billing/refunds/examples/email.md' },
        },
        Any,
      ),
    ).rejects.toMatchObject({ code: -32602 })
    expect(reads()).toBe(before)
    // The other member's skill of the same URI is untouched.
    const other = await mcpPost(url, 'resources/read', {
      uri: 'skill://support/refunds/examples/email.md',
    })
    expect((other.response().result as { contents: { text: string }[] }).contents[0]?.text).toBe(
      'support email\n',
    )
    expect(support.calls('resources/read').at(-1)?.header('mcp-name')).toBe(
      'skill://refunds/examples/email.md',
    )
  })

  it('declares directoryRead when every member that serves skills reads directories', async () => {
    const a = await closing(startSkillsServer({ name: 'a' }))
    const b = await closing(startSkillsServer({ name: 'b', prefix: 'team-b' }))
    const gw = await startTestGateway({
      servers: { a: { upstreams: [{ url: a.url }] }, b: { upstreams: [{ url: b.url }] } },
      virtualServers: { desk: { members: ['a', 'b'] } },
    })
    const skills = new SkillsClient(await closing(connectClient(gw.mcpUrl('desk'))))
    expect(skills.directoryRead).toBe(true)
    const dir = await skills.readDirectory('skill://team-b/refunds')
    expect(dir.resources.map((r) => r.uri)).toContain('skill://team-b/refunds/SKILL.md')
    expect(b.calls('resources/directory/read')).toHaveLength(1)
    expect(a.calls('resources/directory/read')).toHaveLength(0)
  })

  it('never serves two members’ skills under one URI with prefix: never', async () => {
    const { gw } = await twoMembers({ prefix: 'never' })
    const uris = await listedSkills(gw.mcpUrl('desk'))
    expect(uris.sort()).toEqual(['skill://ledger/SKILL.md', 'skill://secrets/SKILL.md'])
    expectUnknown(
      await mcpPost(
        gw.mcpUrl('desk'),
        'skills/get',
        { uri: 'skill://refunds/SKILL.md' },
        { id: 6 },
      ),
      6,
      'No skill is served at skill://refunds/SKILL.md',
    )
  })
})

describe('MCP Apps through a virtual server', () => {
  async function apps(prefix: string) {
    const weather = await closing(startAppsServer({ name: 'weather' }))
    const maps = await closing(startAppsServer({ name: 'maps' }))
    const gw = await startTestGateway({
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        maps: { upstreams: [{ url: maps.url }] },
      },
      virtualServers: { desk: { members: ['weather', 'maps'], prefix } },
    })
    return { weather, maps, gw, client: await closing(connectClient(gw.mcpUrl('desk'))) }
  }

  it('points each tool at its own member’s app, reads it back, and routes the app’s calls', async () => {
    const { weather, maps, gw, client } = await apps('onCollision')
    const { tools } = await client.listTools()
    const shows = tools.filter((t) => t.name.endsWith('show_dashboard'))
    const pointers = Object.fromEntries(
      shows.map((t) => [t.name, (t._meta as { ui: { resourceUri: string } }).ui.resourceUri]),
    )
    expect(pointers).toEqual({
      weather_show_dashboard: 'ui://weather/dashboard',
      maps_show_dashboard: 'ui://maps/dashboard',
    })
    // The host reads the app as the tool names it: the member's HTML, under the exposed URI.
    const html = await client.readResource({ uri: 'ui://maps/dashboard' })
    expect(html.contents).toMatchObject([{ uri: 'ui://maps/dashboard', mimeType: APP_MIME_TYPE }])
    expect((html.contents[0] as { text: string }).text).toContain('data-server="maps"')
    expect(maps.calls('resources/read').at(-1)?.header('mcp-name')).toBe('ui://dashboard')
    // The host calls the tool by its exposed name.
    const shown = await client.callTool({ name: 'weather_show_dashboard', arguments: {} })
    expect(shown.content).toEqual([{ type: 'text', text: 'weather:show_dashboard' }])
    // The app calls its own server's tool by the member's own name; the call names its app.
    const refresh = await client.callTool({
      name: 'refresh_dashboard',
      arguments: {},
      _meta: { ui: { resourceUri: 'ui://maps/dashboard' } },
    })
    expect(refresh.content).toEqual([{ type: 'text', text: 'maps:refresh_dashboard' }])
    expect(weather.calls('tools/call')).toHaveLength(1)
    // Without naming its app, a name both members’ apps may call leads to neither.
    const unnamed = await mcpPost(
      gw.mcpUrl('desk'),
      'tools/call',
      { name: 'refresh_dashboard', arguments: {} },
      { id: 8 },
    )
    expectUnknown(unnamed, 8, 'Unknown tool: refresh_dashboard')
    expect(maps.calls('tools/call')).toHaveLength(1)
    expect(weather.calls('tools/call')).toHaveLength(1)
  })

  it('passes the host’s MCP Apps capability to the members, and governs ui:// by resources rules', async () => {
    const weather = await closing(startAppsServer({ name: 'weather' }))
    const maps = await closing(startAppsServer({ name: 'maps' }))
    const dir = policyDir(`
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"], resources: ["*"] }
  - name: no-maps-app
    servers: [maps]
    deny: { resources: ["ui://*"] }
`)
    const gw = await startTestGateway(
      {
        servers: {
          weather: { upstreams: [{ url: weather.url }] },
          maps: { upstreams: [{ url: maps.url }] },
        },
        virtualServers: { desk: { members: ['weather', 'maps'], prefix: 'onCollision' } },
        policies: '.',
      },
      { dir },
    )
    const ui = { 'io.modelcontextprotocol/ui': { mimeTypes: [APP_MIME_TYPE] } }
    const client = await closing(
      connectClient(gw.mcpUrl('desk'), { capabilities: { extensions: ui } }),
    )
    await client.listTools()
    for (const member of [weather, maps]) {
      const meta = (member.calls('tools/list').at(-1)?.json() as { params: { _meta: object } })
        .params._meta as Record<string, { extensions?: unknown }>
      expect(meta['io.modelcontextprotocol/clientCapabilities']?.extensions).toEqual(ui)
    }
    const html = await client.readResource({ uri: 'ui://weather/dashboard' })
    expect((html.contents[0] as { text: string }).text).toContain('data-server="weather"')
    const before = maps.calls('resources/read').length
    expectUnknown(
      await mcpPost(gw.mcpUrl('desk'), 'resources/read', { uri: 'ui://maps/dashboard' }, { id: 9 }),
      9,
      'Resource not found: ui://maps/dashboard',
    )
    expect(maps.calls('resources/read')).toHaveLength(before)
  })

  it('accepts a lone member app’s own names under prefix: always', async () => {
    const weather = await closing(startAppsServer({ name: 'weather' }))
    const gw = await startTestGateway({
      servers: { weather: { upstreams: [{ url: weather.url }] } },
      virtualServers: { desk: { members: ['weather'], prefix: 'always' } },
    })
    const client = await closing(connectClient(gw.mcpUrl('desk')))
    const { tools } = await client.listTools()
    const show = tools.find((t) => t.name === 'weather_show_dashboard')
    expect((show?._meta as { ui: { resourceUri: string } }).ui.resourceUri).toBe(
      'ui://weather/dashboard',
    )
    const res = await client.callTool({ name: 'refresh_dashboard', arguments: {} })
    expect(res.content).toEqual([{ type: 'text', text: 'weather:refresh_dashboard' }])
  })
})
