import { describe, expect, it } from 'vitest'
import type { McpTarget } from '../../../src/mcp/classify.js'
import { caller, policyOf } from './fixtures.js'

const tool = (name: string): McpTarget => ({ kind: 'tool', name })
const prompt = (name: string): McpTarget => ({ kind: 'prompt', name })
const resource = (uri: string): McpTarget => ({ kind: 'resource', uri })

const ISSUE_EXAMPLE = `
rules:
  - name: everyone-reads-weather
    servers: [weather]
    allow:
      tools: ["get_*", "list_*"]
      prompts: ["*"]
      resources: ["weather://*"]
  - name: no-deletes-anywhere
    servers: ["*"]
    deny:
      tools: ["delete_*"]
  - name: admins
    when: { claims: { groups: admin } }
    servers: ["*"]
    allow: { tools: ["*"] }
`

describe('policy decisions (issue 3 semantics)', () => {
  const policy = policyOf(ISSUE_EXAMPLE)
  const admin = caller({ groups: ['eng', 'admin'] })
  const eng = caller({ groups: ['eng'] })

  it.each([
    // caller, server, target, allowed, deciding rule
    ['anonymous', 'weather', tool('get_forecast'), true, 'everyone-reads-weather'],
    ['anonymous', 'weather', tool('list_stations'), true, 'everyone-reads-weather'],
    ['anonymous', 'weather', tool('slow_forecast'), false, undefined],
    ['anonymous', 'weather', tool('Get_forecast'), false, undefined],
    ['anonymous', 'weather', tool('get_forecast '), true, 'everyone-reads-weather'], // * takes the space too
    ['anonymous', 'weather', tool('ｇet_forecast'), false, undefined],
    ['anonymous', 'weather', tool('delete_station'), false, 'no-deletes-anywhere'],
    ['anonymous', 'weather', prompt('anything'), true, 'everyone-reads-weather'],
    ['anonymous', 'weather', resource('weather://oslo'), true, 'everyone-reads-weather'],
    ['anonymous', 'weather', resource('WEATHER://oslo'), false, undefined],
    ['anonymous', 'docs', tool('get_forecast'), false, undefined], // rule is for weather only
    ['anonymous', 'docs', resource('docs://readme'), false, undefined], // default deny
    ['eng', 'docs', tool('search_docs'), false, undefined],
    ['admin', 'docs', tool('search_docs'), true, 'admins'],
    ['admin', 'weather', tool('slow_forecast'), true, 'admins'],
    ['admin', 'weather', tool('delete_station'), false, 'no-deletes-anywhere'], // deny wins
    ['admin', 'docs', prompt('summarize'), false, undefined], // admins only got tools
  ])('%s caller, on %s: %j → allowed %s by %s', (_who, server, target, allowed, rule) => {
    const who = _who === 'admin' ? admin : _who === 'eng' ? eng : undefined
    const d = policy.check(who, server, target)
    expect(d.allow).toBe(allowed)
    expect(d.rule?.name).toBe(rule)
    expect(d.dryRun).toBe(false)
    expect(d.reason).toBe(
      rule === undefined ? 'default_deny' : allowed ? 'allow_rule' : 'deny_rule',
    )
  })

  it.each(['Search', 'SEARCH', 'search ', ' search', 'ｓearch', 'search\u0000', 'searc'])(
    'an allowlisted "search" does not allow %j (exact match, reliability A-70)',
    (name) => {
      const p = policyOf('rules: [{ name: s, servers: ["*"], allow: { tools: [search] } }]')
      expect(p.check(admin, 'docs', tool('search')).allow).toBe(true)
      expect(p.check(admin, 'docs', tool(name))).toMatchObject({
        allow: false,
        reason: 'default_deny',
      })
    },
  )

  it('denies everything when no rule allows anything (default deny)', () => {
    const empty = policyOf('rules: []')
    expect(empty.check(admin, 'weather', tool('get_forecast'))).toMatchObject({
      allow: false,
      reason: 'default_deny',
    })
  })

  it('lets a deny in any rule win over an allow in any other, whatever the order', () => {
    const p = policyOf(`
rules:
  - { name: deny-first, servers: ["*"], deny: { tools: [search] } }
  - { name: allow-later, servers: ["*"], allow: { tools: ["*"] } }
`)
    const q = policyOf(`
rules:
  - { name: allow-first, servers: ["*"], allow: { tools: ["*"] } }
  - { name: deny-later, servers: ["*"], deny: { tools: [search] } }
`)
    expect(p.check(undefined, 'weather', tool('search'))).toMatchObject({
      allow: false,
      reason: 'deny_rule',
    })
    expect(q.check(undefined, 'weather', tool('search'))).toMatchObject({
      allow: false,
      reason: 'deny_rule',
    })
    expect(q.check(undefined, 'weather', tool('searches'))).toMatchObject({ allow: true })
  })

  it('keeps kinds apart: allowing a tool says nothing about a prompt of the same name', () => {
    const p = policyOf('rules: [{ name: t, servers: ["*"], allow: { tools: [summarize] } }]')
    expect(p.check(undefined, 'docs', tool('summarize')).allow).toBe(true)
    expect(p.check(undefined, 'docs', prompt('summarize')).allow).toBe(false)
    expect(p.check(undefined, 'docs', resource('summarize')).allow).toBe(false)
  })
})

describe('when.claims', () => {
  const p = policyOf(`
rules:
  - name: ops
    when: { claims: { groups: ops, email_verified: true, level: 3 } }
    servers: ["*"]
    allow: { tools: [restart] }
`)
  it.each([
    [
      'all claims match (array contains)',
      { groups: ['dev', 'ops'], email_verified: true, level: 3 },
      true,
    ],
    ['all claims match (scalar equals)', { groups: 'ops', email_verified: true, level: 3 }, true],
    ['one claim missing', { groups: ['ops'], level: 3 }, false],
    ['boolean compared strictly', { groups: ['ops'], email_verified: 'true', level: 3 }, false],
    ['number compared strictly', { groups: ['ops'], email_verified: true, level: '3' }, false],
    ['case matters', { groups: ['Ops'], email_verified: true, level: 3 }, false],
    ['no substring match', { groups: 'ops-team', email_verified: true, level: 3 }, false],
    [
      'nested arrays are not searched',
      { groups: [['ops']], email_verified: true, level: 3 },
      false,
    ],
    ['array of the number', { groups: ['ops'], email_verified: true, level: [1, 3] }, true],
  ])('%s', (_name, claims, allowed) => {
    expect(p.check(caller(claims), 'weather', tool('restart')).allow).toBe(allowed)
  })

  it('never matches an anonymous caller', () => {
    expect(p.check(undefined, 'weather', tool('restart')).allow).toBe(false)
  })

  it('never matches inherited properties such as constructor', () => {
    const q = policyOf(`
rules:
  - { name: proto, when: { claims: { constructor: x } }, servers: ["*"], allow: { tools: ["*"] } }
`)
    expect(q.check(caller(), 'weather', tool('x')).allow).toBe(false)
  })
})

describe('dry run', () => {
  it('global dry run allows what the policy would deny, and says so', () => {
    const p = policyOf(ISSUE_EXAMPLE, 'dry-run')
    expect(p.check(undefined, 'weather', tool('delete_station'))).toMatchObject({
      allow: true,
      dryRun: true,
      reason: 'deny_rule',
      rule: { name: 'no-deletes-anywhere' },
    })
    expect(p.check(undefined, 'weather', tool('slow_forecast'))).toMatchObject({
      allow: true,
      dryRun: true,
      reason: 'default_deny',
    })
    expect(p.check(undefined, 'weather', tool('get_forecast'))).toMatchObject({
      allow: true,
      dryRun: false,
    })
  })

  it('a dry-run deny rule reports "would deny" and never blocks', () => {
    const p = policyOf(`
rules:
  - { name: reads, servers: [weather], allow: { tools: ["get_*", slow_forecast] } }
  - { name: retire-slow, mode: dry-run, servers: [weather], deny: { tools: [slow_forecast] } }
`)
    expect(p.check(undefined, 'weather', tool('slow_forecast'))).toMatchObject({
      allow: true,
      dryRun: true,
      rule: { name: 'retire-slow' },
    })
    expect(p.check(undefined, 'weather', tool('get_forecast'))).toMatchObject({
      allow: true,
      dryRun: false,
      rule: { name: 'reads' },
    })
    // an enforced denial stays a denial
    expect(p.check(undefined, 'weather', tool('delete_station'))).toMatchObject({
      allow: false,
      dryRun: false,
    })
  })

  it('a dry-run allow rule does not allow anything yet', () => {
    const p = policyOf(
      'rules: [{ name: soon, mode: dry-run, servers: ["*"], allow: { tools: ["*"] } }]',
    )
    expect(p.check(undefined, 'weather', tool('get_forecast'))).toMatchObject({
      allow: false,
      dryRun: false,
    })
  })
})
