import { describe, expect, it } from 'vitest'
import { filterMessage } from '../../../src/mcp/list-filter.js'
import { caller, policyOf } from './fixtures.js'

const RULES = `
rules:
  - name: reads
    servers: [weather]
    allow: { tools: ["get_*"], prompts: [summarize], resources: ["docs://*"] }
  - name: no-deletes
    servers: ["*"]
    deny: { tools: ["delete_*"], resources: ["docs://pages/secret*"] }
  - name: docs-all
    servers: [docs]
    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }
`

const names = (result: Record<string, unknown>, field: string, key = 'name'): unknown[] =>
  (result[field] as Record<string, unknown>[]).map((i) => i[key])

describe('list filters', () => {
  const policy = policyOf(RULES)

  it('keeps exactly the tools, prompts and resources a call would be allowed for', () => {
    const f = policy.listFilter(undefined, 'weather')
    expect(f).toBeDefined()
    const tools = f!.apply('tools/list', {
      tools: [
        { name: 'get_forecast' },
        { name: 'delete_station' },
        { name: 'slow_forecast' },
        { name: 'Get_alerts' },
      ],
      nextCursor: 'abc',
      ttlMs: 1000,
      cacheScope: 'public',
    })
    expect(names(tools, 'tools')).toEqual(['get_forecast'])
    expect(tools).toMatchObject({ nextCursor: 'abc', ttlMs: 1000, cacheScope: 'public' })
    const prompts = f!.apply('prompts/list', {
      prompts: [{ name: 'summarize' }, { name: 'review' }],
    })
    expect(names(prompts, 'prompts')).toEqual(['summarize'])
    const resources = f!.apply('resources/list', {
      resources: [
        { uri: 'docs://readme' },
        { uri: 'docs://pages/secret-plan' },
        { uri: 'file:///etc/passwd' },
      ],
    })
    expect(names(resources, 'resources', 'uri')).toEqual(['docs://readme'])
  })

  it('matches resource templates by their uriTemplate text, braces included', () => {
    const p = policyOf(`
rules:
  - { name: pages, servers: [docs], allow: { resources: ["docs://pages/*", "docs://readme"] } }
  - { name: no-drafts, servers: [docs], deny: { resources: ["docs://drafts/*"] } }
`)
    const f = p.listFilter(undefined, 'docs')!
    const out = f.apply('resources/templates/list', {
      resourceTemplates: [
        { uriTemplate: 'docs://pages/{name}' },
        { uriTemplate: 'docs://drafts/{name}' },
        { uriTemplate: 'docs://{path}' },
        { uriTemplate: 'docs://readme' },
      ],
    })
    expect(names(out, 'resourceTemplates', 'uriTemplate')).toEqual([
      'docs://pages/{name}',
      'docs://readme',
    ])
  })

  it('drops items without a string name instead of showing them unjudged', () => {
    const f = policyOf(
      'rules: [{ name: all, servers: ["*"], allow: { tools: ["*"] } }]',
    ).listFilter(undefined, 'docs')!
    const out = f.apply('tools/list', {
      tools: [{ name: 'ok' }, { name: 7 }, {}, 'bare', null, { name: 'fine' }],
    })
    expect(names(out, 'tools')).toEqual(['ok', 'fine'])
  })

  it('leaves a result without the item array alone, and never touches the input', () => {
    const f = policy.listFilter(undefined, 'weather')!
    const input = Object.freeze({ tools: Object.freeze([{ name: 'delete_station' }]) })
    expect(f.apply('tools/list', input)).toEqual({ tools: [] })
    expect(input.tools).toHaveLength(1)
    expect(f.apply('tools/list', { nope: 1 })).toEqual({ nope: 1 })
  })

  it('is identity-independent (stays public) when no rule for the server has `when`', () => {
    const f = policy.listFilter(caller(), 'weather')!
    expect(f.identityDependent).toBe(false)
    const msg = filterMessage(f, 'tools/list', {
      jsonrpc: '2.0',
      id: 1,
      result: { tools: [], cacheScope: 'public' },
    })
    expect(msg?.result).toMatchObject({ cacheScope: 'public' })
  })

  it('is identity-dependent (public becomes private) when a rule for the server has `when`', () => {
    const p = policyOf(`${RULES}
  - name: admins
    when: { claims: { groups: admin } }
    servers: [weather]
    allow: { tools: ["*"] }
`)
    const anon = p.listFilter(undefined, 'weather')!
    expect(anon.identityDependent).toBe(true)
    const msg = filterMessage(anon, 'tools/list', {
      jsonrpc: '2.0',
      id: 1,
      result: { tools: [], cacheScope: 'public' },
    })
    expect(msg?.result).toMatchObject({ cacheScope: 'private' })
    // the docs server has no `when` rule: its lists stay shareable
    expect(p.listFilter(caller({ groups: 'admin' }), 'docs')!.identityDependent).toBe(false)
  })

  it('keys the filter by server and the rules that matched the caller', () => {
    const p = policyOf(`${RULES}
  - name: admins
    when: { claims: { groups: admin } }
    servers: [weather]
    allow: { tools: ["*"] }
`)
    const anon = p.listFilter(undefined, 'weather')!
    const bob = p.listFilter(caller({ sub: 'bob' }), 'weather')!
    const admin = p.listFilter(caller({ groups: ['admin'] }), 'weather')!
    const otherAdmin = p.listFilter(caller({ sub: 'carol', groups: 'admin' }), 'weather')!
    expect(anon.key).toBe(bob.key) // same rules matched, same outcome, whoever they are
    expect(admin.key).toBe(otherAdmin.key)
    expect(admin.key).not.toBe(anon.key)
    expect(p.listFilter(undefined, 'docs')!.key).not.toBe(anon.key)
    expect(
      names(admin.apply('tools/list', { tools: [{ name: 'slow_forecast' }] }), 'tools'),
    ).toEqual(['slow_forecast'])
    expect(
      names(anon.apply('tools/list', { tools: [{ name: 'slow_forecast' }] }), 'tools'),
    ).toEqual([])
  })

  it('changes the key when a rule with the same name changes', () => {
    const a = policyOf('rules: [{ name: r, servers: ["*"], allow: { tools: [a] } }]').listFilter(
      undefined,
      'docs',
    )!
    const b = policyOf('rules: [{ name: r, servers: ["*"], allow: { tools: [b] } }]').listFilter(
      undefined,
      'docs',
    )!
    expect(a.key).not.toBe(b.key)
  })

  it('hides nothing in global dry run, and ignores dry-run rules when filtering', () => {
    expect(policyOf(RULES, 'dry-run').listFilter(undefined, 'weather')).toBeUndefined()
    const p = policyOf(`
rules:
  - { name: reads, servers: ["*"], allow: { tools: ["*"] } }
  - { name: soon, mode: dry-run, servers: ["*"], deny: { tools: [slow_forecast] } }
`)
    const f = p.listFilter(undefined, 'weather')!
    expect(names(f.apply('tools/list', { tools: [{ name: 'slow_forecast' }] }), 'tools')).toEqual([
      'slow_forecast',
    ])
  })
})
