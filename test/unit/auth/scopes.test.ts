import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { compileAuth } from '../../../src/auth/compile.js'
import { ScopeGate } from '../../../src/auth/scopes.js'
import { ConfigError, parseConfigText } from '../../../src/runtime/load.js'

const PUBLIC = 'https://mcp.example.com'
const PRM = (name: string): string => `${PUBLIC}/.well-known/oauth-protected-resource/mcp/${name}`
const AUTH = { publicUrl: PUBLIC, jwt: { issuer: 'https://idp', jwksUrl: 'https://idp/jwks.json' } }

function load(servers: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const text = stringify({ auth: AUTH, servers, ...extra })
  try {
    return parseConfigText(text, { dir: process.cwd() }).config
  } catch (err) {
    if (err instanceof ConfigError) throw new Error(err.problems.join('\n'), { cause: err })
    throw err
  }
}

const up = [{ url: 'http://127.0.0.1:1/mcp' }]
const docs = {
  upstreams: up,
  requiredScopes: ['mcp'],
  scopes: {
    tools: { 'write_*': ['docs:write'], '*': ['docs:read'] },
    resources: { 'docs://secret/*': ['docs:secret'] },
  },
}

function gateFor(servers: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const config = load(servers, extra)
  const auth = compileAuth(config, process.cwd())
  return { gate: ScopeGate.compile(config, auth), auth }
}

describe('ScopeGate (servers.<name>.scopes)', () => {
  it('needs requiredScopes plus the scopes of every matching pattern, named in one challenge', () => {
    const { gate } = gateFor({ docs })
    const g = gate as ScopeGate
    const tool = (name: string) => ({ kind: 'tool', name }) as const
    expect(g.refusal('docs', 'docs', new Set(['mcp', 'docs:read']), tool('read_page'))).toBe(
      undefined,
    )
    expect(g.refusal('docs', 'docs', new Set(['mcp', 'docs:read']), tool('write_page'))).toBe(
      `Bearer error="insufficient_scope", scope="mcp docs:write docs:read", resource_metadata="${PRM('docs')}"`,
    )
    // One matching pattern held is not enough: write_* also matches `*`.
    expect(g.refusal('docs', 'docs', new Set(['mcp', 'docs:write']), tool('write_page'))).toMatch(
      /scope="mcp docs:write docs:read"/,
    )
    expect(g.refusal('docs', 'docs', new Set(['mcp']), tool('read'))).toBe(
      `Bearer error="insufficient_scope", scope="mcp docs:read", resource_metadata="${PRM('docs')}"`,
    )
    // Names are matched byte for byte: `Write_page` is not `write_*`.
    expect(g.refusal('docs', 'docs', new Set(['mcp', 'docs:read']), tool('Write_page'))).toBe(
      undefined,
    )
    const secret = { kind: 'resource', uri: 'docs://secret/a' } as const
    expect(g.refusal('docs', 'docs', new Set(['mcp']), secret)).toMatch(/scope="mcp docs:secret"/)
    expect(g.refusal('docs', 'docs', new Set(), { kind: 'prompt', name: 'p' })).toBe(undefined)
    expect(g.refusal('docs', 'docs', undefined, tool('x'))).toMatch(/insufficient_scope/)
    // The same challenge object is reused: built once per pattern combination.
    const a = g.refusal('docs', 'docs', new Set(), tool('write_a'))
    expect(g.refusal('docs', 'docs', new Set(), tool('write_b'))).toBe(a)
  })

  it('names the virtual endpoint and every scope it needs when a member target lacks one', () => {
    const other = { upstreams: up, requiredScopes: ['other'] }
    const { gate } = gateFor(
      { docs, other },
      { virtualServers: { all: { members: ['docs', 'other'] } } },
    )
    expect(
      gate?.refusal('all', 'docs', new Set(['mcp', 'other']), { kind: 'tool', name: 'w' }),
    ).toBe(
      `Bearer error="insufficient_scope", scope="mcp other docs:read", resource_metadata="${PRM('all')}"`,
    )
    expect(gate?.refusal('all', 'other', new Set(), { kind: 'tool', name: 'w' })).toBe(undefined)
  })

  it('spells out what a call needs for explain, offline', () => {
    const gate = ScopeGate.offline(load({ docs }))
    expect(gate?.needs('docs', { kind: 'tool', name: 'write_x' })).toEqual([
      'mcp',
      'docs:write',
      'docs:read',
    ])
    expect(gate?.needs('docs', { kind: 'prompt', name: 'p' })).toEqual(['mcp'])
    expect(gate?.needs('other', { kind: 'tool', name: 'x' })).toBeUndefined()
    expect(ScopeGate.offline(load({ plain: { upstreams: up } }))).toBeUndefined()
  })

  it('is absent without scopes, and list views follow scopesInLists', () => {
    expect(gateFor({ plain: { upstreams: up } }).gate).toBeUndefined()
    const { gate } = gateFor({ docs, step: { ...docs, scopesInLists: 'stepUp' } })
    expect(gate?.listView('step', new Set())).toBeUndefined()
    const view = gate?.listView('docs', new Set(['docs:read', 'unrelated']))
    expect(view?.key).toBe('scopes:docs:docs:read')
    expect(view?.visible('tool', 'read')).toBe(true)
    expect(view?.visible('tool', 'write_x')).toBe(false)
    expect(view?.visible('event', 'anything')).toBe(true)
    expect(gate?.listView('docs', new Set(['docs:read', 'docs:write']))?.key).toBe(
      'scopes:docs:docs:read docs:write',
    )
  })

  it("advertises per-target scopes in scopes_supported, the virtual endpoint its members'", () => {
    const { auth } = gateFor({ docs }, { virtualServers: { v: { members: ['docs'] } } })
    const scopes = ['mcp', 'docs:write', 'docs:read', 'docs:secret']
    expect(auth?.servers.get('docs')?.metadata.scopes_supported).toEqual(scopes)
    expect(auth?.servers.get('v')?.metadata.scopes_supported).toEqual(scopes)
    expect(auth?.rootMetadata.scopes_supported).toEqual(scopes)
    // What the 401 and the endpoint require stays requiredScopes.
    expect(auth?.servers.get('docs')?.requiredScopes).toEqual(['mcp'])
  })

  it('refuses scopes and clients without auth, and empty or invalid scope lists', () => {
    const problems = (server: Record<string, unknown>, auth = false): string[] => {
      try {
        parseConfigText(
          stringify({ ...(auth && { auth: AUTH }), servers: { s: { upstreams: up, ...server } } }),
          {
            dir: process.cwd(),
          },
        )
        return []
      } catch (err) {
        if (err instanceof ConfigError) return [...err.problems]
        throw err
      }
    }
    expect(problems({ scopes: { tools: { '*': ['a'] } } })).toContain(
      'servers.s.scopes: needs auth to be configured',
    )
    expect(problems({ clients: ['app'] })).toContain(
      'servers.s.clients: needs auth to be configured',
    )
    expect(problems({ scopes: { tools: { '*': [] } } }, true).join()).toMatch(/scopes\.tools/)
    expect(problems({ scopes: { tools: { '*': ['a"b'] } } }, true).join()).toMatch(/scope-token/)
    expect(problems({ scopes: { tool: {} } }, true).join()).toMatch(/scopes\.tool: unknown key/)
    expect(problems({ scopesInLists: 'show' }, true).join()).toMatch(/scopesInLists/)
  })
})
