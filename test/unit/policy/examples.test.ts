import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { loadConfigFile } from '../../../src/runtime/load.js'
import type { McpTarget } from '../../../src/mcp/classify.js'
import { loadPolicySet } from '../../../src/policy/load.js'
import { caller } from './fixtures.js'

const root = (p: string): string => fileURLToPath(new URL(`../../../${p}`, import.meta.url))
const tool = (name: string): McpTarget => ({ kind: 'tool', name })

describe('shipped policies', () => {
  it('the embedded default (deploy/gateway.demo.yaml) loads policies/ and decides as documented', () => {
    const loaded = loadConfigFile(root('deploy/gateway.demo.yaml'))
    const policy = loaded.policy
    expect(policy).toBeDefined()
    const visible = (server: string, t: McpTarget): boolean =>
      policy!.check(undefined, server, t).allow
    for (const t of ['get_forecast', 'get_alerts', 'slow_forecast', 'confirm_action']) {
      expect(visible('weather', tool(t))).toBe(true)
    }
    expect(policy!.check(undefined, 'weather', tool('delete_station'))).toMatchObject({
      allow: false,
      rule: { name: 'no-deletes-anywhere' },
    })
    expect(visible('docs', tool('search_docs'))).toBe(true)
    expect(visible('docs', { kind: 'prompt', name: 'review' })).toBe(true)
    expect(visible('docs', { kind: 'resource', uri: 'docs://pages/install' })).toBe(true)
    expect(visible('docs', tool('delete_everything'))).toBe(false)
    // examples/ is a subfolder: its rules are not part of the default
    expect(policy!.rules.map((r) => r.name)).not.toContain('admins-everything')
  })

  it('policies/examples/ passes the schema and means what its comments say', () => {
    const policy = loadPolicySet({
      folder: root('policies/examples'),
      label: 'policies/examples',
      mode: 'enforce',
      servers: ['weather', 'docs', 'internal-wiki', 'acme-billing'],
    })
    expect(policy.rules.length).toBeGreaterThanOrEqual(8)
    const admin = caller({ groups: ['mcp-admins'] })
    const ops = caller({ groups: ['station-ops'], email_verified: true })
    const opsUnverified = caller({ groups: ['station-ops'] })
    const contractor = caller({ employment: 'contractor', groups: ['mcp-admins'] })
    expect(policy.check(undefined, 'weather', tool('delete_station')).allow).toBe(false)
    expect(policy.check(admin, 'weather', tool('delete_station')).allow).toBe(true)
    expect(policy.check(ops, 'weather', tool('delete_station')).allow).toBe(true)
    expect(policy.check(opsUnverified, 'weather', tool('delete_station')).allow).toBe(false)
    expect(policy.check(contractor, 'docs', { kind: 'prompt', name: 'review' })).toMatchObject({
      allow: false,
      rule: { name: 'contractors-no-review' },
    })
    expect(
      policy.check(undefined, 'docs', { kind: 'resource', uri: 'docs://pages/draft-plan' }),
    ).toMatchObject({
      allow: false,
      rule: { name: 'docs-hide-drafts' },
    })
    expect(
      policy.check(undefined, 'internal-wiki', {
        kind: 'resource',
        uri: 'https://wiki.example.com/x',
      }).allow,
    ).toBe(true)
    expect(policy.check(caller({ tenant: 'acme' }), 'acme-billing', tool('invoice')).allow).toBe(
      true,
    )
    expect(policy.check(undefined, 'weather', tool('slow_forecast'))).toMatchObject({
      allow: true,
      dryRun: true,
      rule: { name: 'retire-slow-forecast' },
    })
  })
})
