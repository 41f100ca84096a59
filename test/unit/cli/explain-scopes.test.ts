import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { explainCommand } from '../../../src/cli/explain.js'
import { tempFolder } from '../policy/fixtures.js'

const CONFIG = `
auth:
  publicUrl: https://mcp.example.com
  jwt: { issuer: https://idp.example.com, jwksUrl: https://idp.example.com/jwks.json }
servers:
  docs:
    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]
    requiredScopes: [mcp]
    scopes: { tools: { "write_*": [docs:write], "*": [docs:read] } }
  other: { upstreams: [{ url: "http://127.0.0.1:2/mcp" }], requiredScopes: [other] }
virtualServers:
  desk: { members: [docs, other], prefix: always }
`

function run(args: string[], config = CONFIG, files: Record<string, string> = {}) {
  const dir = tempFolder({ 'gateway.yaml': config, ...files })
  let out = ''
  const file = join(dir, 'gateway.yaml')
  const code = explainCommand(file, ['--config', file, ...args], {
    out: (t) => void (out += t),
    err: (t) => void (out += t),
  })
  return { code, out }
}

describe('mcp-edge explain --scopes', () => {
  it('reads the scopes of --claims as the gateway reads the token, without --scopes', () => {
    // `scope` (space-separated) and `scp` (an array, or a string) both count, as in serve.
    for (const claims of [
      { sub: 'alice', scope: 'mcp docs:read' },
      { sub: 'alice', scp: ['mcp', 'docs:read'] },
      { sub: 'alice', scp: 'mcp docs:read' },
    ]) {
      const args = ['--server', 'docs', '--tool', 'write_page', '--claims', JSON.stringify(claims)]
      const r = run(args)
      expect(r.code).toBe(3)
      expect(r.out).toContain('403 insufficient_scope')
      expect(r.out).toContain('missing "docs:write"')
    }
    const enough = JSON.stringify({ sub: 'alice', scope: 'mcp docs:read docs:write' })
    expect(run(['--server', 'docs', '--tool', 'write_page', '--claims', enough]).code).toBe(0)
  })

  it('names the missing scope, and denies before policy (exit 3)', () => {
    const r = run(['--server', 'docs', '--tool', 'write_page', '--scopes', 'mcp docs:read'])
    expect(r.code).toBe(3)
    expect(r.out).toContain('decision: deny\n')
    expect(r.out).toContain('403 insufficient_scope')
    expect(r.out).toContain(
      'scopes: needs "mcp docs:write docs:read"; the token has "mcp docs:read"; missing "docs:write"\n',
    )
  })

  it('allows when nothing is missing, and only says what is needed without --scopes', () => {
    const ok = run(['--server', 'docs', '--tool', 'read_page', '--scopes', 'mcp docs:read'])
    expect(ok.code).toBe(0)
    expect(ok.out).toContain('decision: allow\n')
    expect(ok.out).toContain('none missing\n')
    const unchecked = run(['--server', 'docs', '--tool', 'write_page'])
    expect(unchecked.code).toBe(0)
    expect(unchecked.out).toContain(
      'scopes: needs "mcp docs:write docs:read" (not checked: no --scopes)\n',
    )
  })

  it("JSON, and a virtual server's member needs its scopes plus the endpoint's", () => {
    const r = run(['--server', 'desk', '--tool', 'docs_write_page', '--scopes', 'mcp', '--json'])
    expect(r.code).toBe(3)
    const out = JSON.parse(r.out) as { decision: string; members: Record<string, unknown>[] }
    expect(out.decision).toBe('deny')
    expect(out.members[0]).toMatchObject({
      member: 'docs',
      decision: 'deny',
      reason: 'insufficient_scope',
      scopes: {
        needed: ['mcp', 'other', 'docs:write', 'docs:read'],
        held: ['mcp'],
        missing: ['other', 'docs:write', 'docs:read'],
      },
    })
  })

  it('scopes, then policy: with the scopes, the rules decide', () => {
    const rules = 'rules:\n  - { name: reads, servers: [docs], allow: { tools: ["read_*"] } }\n'
    const config = `policies: ./policies\n${CONFIG}`
    const files = { 'policies/main.yaml': rules }
    const all = 'mcp docs:read docs:write'
    const denied = run(['--server', 'docs', '--tool', 'write_page', '--scopes', all], config, files)
    expect(denied.code).toBe(3)
    expect(denied.out).toContain('reason: no rule allows it (default deny)\n')
    expect(denied.out).toContain('none missing\n')
  })
})
