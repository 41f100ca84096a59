import { describe, expect, it } from 'vitest'
import type { McpTarget } from '../../../src/mcp/classify.js'
import { policyOf } from './fixtures.js'

const skill = (name: string): McpTarget => ({ kind: 'skill', name })
const file = (uri: string): McpTarget => ({ kind: 'resource', uri })
const dir = (uri: string): McpTarget => ({ kind: 'resource', uri, directory: true })

const POLICY = `
rules:
  - name: billing-skills
    servers: [docs]
    allow:
      skills: ["skill://acme/billing/*"]
      resources: ["docs://*", "gh://o/*"]
  - name: outer-only
    servers: [docs]
    allow:
      skills: ["skill://outer/SKILL.md"]
  - name: no-chargebacks
    servers: ["*"]
    deny:
      skills: ["skill://acme/billing/chargebacks/SKILL.md", "skill://outer/inner/SKILL.md", "gh://o/r/secret/SKILL.md"]
`

describe('skills in policy (docs/policy.md §Skills)', () => {
  const policy = policyOf(POLICY)

  it.each([
    // a skill: allowed by its own URI only, denied by its own or an enclosing skill's
    [skill('skill://acme/billing/refunds/SKILL.md'), true],
    [skill('skill://acme/billing/chargebacks/SKILL.md'), false],
    [skill('skill://acme/support/SKILL.md'), false],
    [skill('skill://outer/SKILL.md'), true],
    // approving outer does not approve the skills nested in it (skills.mdx §Nested Skills)
    [skill('skill://outer/nested/SKILL.md'), false],
    [skill('skill://outer/inner/SKILL.md'), false],
    // a skill:// file: allowed by a skill it belongs to, denied by any of them
    [file('skill://acme/billing/refunds/SKILL.md'), true],
    [file('skill://acme/billing/refunds/examples/email.md'), true],
    [file('skill://acme/billing/chargebacks/SKILL.md'), false],
    [file('skill://acme/billing/chargebacks/examples/x.md'), false],
    [file('skill://acme/support/SKILL.md'), false],
    [file('skill://acme/SKILL.md'), false],
    // the enclosing skill's approval covers its nested skills' files, but not a denied one's
    [file('skill://outer/nested/notes.md'), true],
    [file('skill://outer/inner/notes.md'), false],
    [file('skill://outer/inner/SKILL.md'), false],
    // a directory read: the directory's own skill counts
    [dir('skill://acme/billing/refunds'), true],
    [dir('skill://acme/billing/refunds/templates'), true],
    [dir('skill://acme/billing/chargebacks'), false],
    [dir('skill://acme'), false],
    // a resources allow never lets a skill:// file through
    [file('skill://docs/readme'), false],
    // other schemes: resources patterns allow, skill patterns deny
    [file('docs://readme'), true],
    [file('gh://o/r/skills/refunds/SKILL.md'), true],
    [file('gh://o/r/secret/SKILL.md'), false],
    [file('gh://o/r/secret/run.sh'), false],
    // too deep to tell which skills it belongs to: nothing allows it
    [file(`skill://acme/billing/${'x/'.repeat(40)}a.md`), false],
  ])('%j → allowed %s', (target, allowed) => {
    expect(policy.check(undefined, 'docs', target).allow).toBe(allowed)
  })

  it('reports the deny of an enclosing skill as what denied a file', () => {
    const d = policy.check(undefined, 'docs', file('skill://outer/inner/a.md'))
    expect(d).toMatchObject({ allow: false, reason: 'deny_rule' })
    expect(d.rule?.name).toBe('no-chargebacks')
  })

  it('filters skills/list entries and skill files in resources/list alike', () => {
    const filter = policy.listFilter(undefined, 'docs')
    const skills = filter?.apply('skills/list', {
      skills: [
        { uri: 'skill://acme/billing/refunds/SKILL.md' },
        { uri: 'skill://acme/billing/chargebacks/SKILL.md' },
        { uri: 'skill://outer/inner/SKILL.md' },
        { uri: 7 },
      ],
    })
    expect(skills?.skills).toEqual([{ uri: 'skill://acme/billing/refunds/SKILL.md' }])
    const resources = filter?.apply('resources/list', {
      resources: [
        { uri: 'skill://acme/billing/refunds/SKILL.md' },
        { uri: 'skill://acme/billing/chargebacks/SKILL.md' },
        { uri: 'docs://readme' },
      ],
    })
    expect(resources?.resources).toEqual([
      { uri: 'skill://acme/billing/refunds/SKILL.md' },
      { uri: 'docs://readme' },
    ])
  })

  it('is checked like every kind: patterns are strings, an unknown key is refused', () => {
    expect(() => policyOf('rules: [{ name: a, servers: ["*"], allow: { skills: [1] } }]')).toThrow()
    expect(() => policyOf('rules: [{ name: a, servers: ["*"], allow: { skill: ["*"] } }]')).toThrow(
      /unrecognized|skill/,
    )
  })

  it('without skill rules, a skill:// file is denied and other resources decide as before', () => {
    const plain = policyOf('rules: [{ name: r, servers: ["*"], allow: { resources: ["*"] } }]')
    expect(plain.check(undefined, 'docs', file('skill://a/SKILL.md')).allow).toBe(false)
    expect(plain.check(undefined, 'docs', file('file:///a/b.txt')).allow).toBe(true)
    expect(plain.check(undefined, 'docs', skill('skill://a/SKILL.md')).allow).toBe(false)
  })
})
