import { describe, expect, it } from 'vitest'
import { appsOf, withExposedApp } from '../../../src/virtual/apps.js'
import { mergeCapabilities } from '../../../src/virtual/merge.js'
import { VirtualState } from '../../../src/virtual/state.js'
import { buildRootTable, prefixedUri } from '../../../src/virtual/uri-names.js'

const MEMBERS = ['billing', 'support']
const routesOf = (t: ReturnType<typeof buildRootTable>) =>
  Object.fromEntries([...t.routes].map(([e, r]) => [e, `${MEMBERS[r.member]} ${r.own}`]))

describe('renamed roots: skills and app resources per member (uri-names.ts)', () => {
  it('puts the member first in the path, so a skill keeps its name as its last segment', () => {
    expect(prefixedUri('billing', 'skill://acme/refunds')).toBe('skill://billing/acme/refunds')
    expect(prefixedUri('billing', 'ui://dashboard')).toBe('ui://billing/dashboard')
    expect(prefixedUri('billing', 'no-scheme')).toBeUndefined()
  })

  it('prefixes roots two members serve, or that nest in another member’s (onCollision)', () => {
    const t = buildRootTable(
      MEMBERS,
      [
        new Set(['skill://refunds', 'skill://outer', 'skill://ledger']),
        new Set(['skill://refunds', 'skill://outer/inner']),
      ],
      'onCollision',
    )
    expect(routesOf(t)).toEqual({
      'skill://billing/refunds': 'billing skill://refunds',
      'skill://support/refunds': 'support skill://refunds',
      'skill://billing/outer': 'billing skill://outer',
      'skill://support/outer/inner': 'support skill://outer/inner',
      'skill://ledger': 'billing skill://ledger',
    })
    expect(t.collisions.map((c) => c.root).sort()).toEqual([
      'skill://outer',
      'skill://outer/inner',
      'skill://refunds',
    ])
  })

  it('leaves colliding roots unreachable under never, and prefixes every root under always', () => {
    const owned = [new Set(['skill://refunds', 'skill://ledger']), new Set(['skill://refunds'])]
    expect(Object.keys(routesOf(buildRootTable(MEMBERS, owned, 'never')))).toEqual([
      'skill://ledger',
    ])
    expect(Object.keys(routesOf(buildRootTable(MEMBERS, owned, 'always'))).sort()).toEqual([
      'skill://billing/ledger',
      'skill://billing/refunds',
      'skill://support/refunds',
    ])
  })

  it('routes to neither when a prefixed root would land in another member’s root', () => {
    // support's own top-level skill is named like the member billing.
    const t = buildRootTable(
      MEMBERS,
      [new Set(['skill://refunds']), new Set(['skill://refunds', 'skill://billing'])],
      'onCollision',
    )
    expect(Object.keys(routesOf(t)).sort()).toEqual(['skill://support/refunds'])
  })

  it('exposes and routes URIs under the roots a member’s lists taught', () => {
    const state = new VirtualState(MEMBERS, 'onCollision')
    state.noteRoots('skills', 0, ['skill://refunds'], true)
    state.noteRoots('skills', 1, ['skill://refunds'], true)
    expect(state.exposeUri(1, 'skill://refunds/examples/a.md')).toBe(
      'skill://support/refunds/examples/a.md',
    )
    expect(state.exposeUri(1, 'docs://readme')).toBe('docs://readme')
    expect(state.routeUri('skill://billing/refunds/SKILL.md')).toEqual({
      member: 0,
      own: 'skill://refunds/SKILL.md',
    })
    expect(state.routeUri('skill://refunds/SKILL.md')).toBeUndefined()
  })
})

describe('MCP Apps and the skills capability through a virtual server', () => {
  const tool = {
    name: 'show',
    _meta: { ui: { resourceUri: 'ui://dashboard', visibility: ['model', 'app'] }, other: 1 },
  }

  it('learns a member’s apps and the tools they may call', () => {
    const apps = appsOf([
      tool,
      { name: 'hidden', _meta: { ui: { visibility: ['model'] } } },
      { name: 'plain' },
    ])
    expect([...apps.resources]).toEqual(['ui://dashboard'])
    expect([...apps.callable].sort()).toEqual(['plain', 'show'])
    const flat = appsOf([{ name: 'old', _meta: { 'ui/resourceUri': 'ui://old' } }])
    expect([...flat.resources]).toEqual(['ui://old'])
  })

  it('points a listed tool at its app’s exposed URI, or at none when it is unreachable', () => {
    expect(withExposedApp(tool, () => 'ui://weather/dashboard')).toEqual({
      name: 'show',
      _meta: {
        ui: { resourceUri: 'ui://weather/dashboard', visibility: ['model', 'app'] },
        other: 1,
      },
    })
    expect(withExposedApp(tool, () => undefined)).toEqual({
      name: 'show',
      _meta: { ui: { visibility: ['model', 'app'] }, other: 1 },
    })
    expect(withExposedApp(tool, (u) => u)).toBe(tool)
  })

  it('declares directoryRead only when every member with skills does', () => {
    const skills = (directoryRead: boolean) => ({
      capabilities: {
        resources: {},
        extensions: {
          'io.modelcontextprotocol/skills': directoryRead ? { directoryRead: true } : {},
        },
      },
    })
    const ui = { capabilities: { extensions: { 'io.modelcontextprotocol/ui': { x: 1 } } } }
    expect(mergeCapabilities([skills(true), skills(true), ui]).extensions).toEqual({
      'io.modelcontextprotocol/skills': { directoryRead: true },
      'io.modelcontextprotocol/ui': { x: 1 },
    })
    expect(mergeCapabilities([skills(true), skills(false)]).extensions).toEqual({
      'io.modelcontextprotocol/skills': {},
    })
  })
})
