import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { explainCommand } from '../../../src/cli/explain.js'
import { prefixedName } from '../../../src/virtual/names.js'
import { tempFolder } from '../policy/fixtures.js'

const CONFIG = `
policies: ./policies
servers:
  weather: { upstreams: [{ url: "http://127.0.0.1:1/mcp" }] }
  docs: { upstreams: [{ url: "http://127.0.0.1:2/mcp" }] }
`
const RULES = `
rules:
  - name: everyone-reads-weather
    servers: [weather]
    allow: { tools: ["get_*"] }
  - name: eng-docs
    when: { claims: { groups: eng } }
    servers: [docs]
    allow: { tools: ["*"], resources: ["docs://*"] }
  - name: no-deletes-anywhere
    servers: ["*"]
    deny: { tools: ["delete_*"] }
  - name: retire-slow
    mode: dry-run
    servers: [weather]
    deny: { tools: [get_slow] }
`

function run(
  args: string[],
  config = CONFIG,
  rules = RULES,
): { code: number; out: string; err: string } {
  const dir = tempFolder({ 'gateway.yaml': config, 'policies/main.yaml': rules })
  let out = ''
  let err = ''
  const file = join(dir, 'gateway.yaml')
  const code = explainCommand(file, ['--config', file, ...args], {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
  })
  return { code, out, err }
}

describe('mcp-edge explain', () => {
  it('prints an allow with its rule and exits 0', () => {
    const r = run(['--server', 'weather', '--tool', 'get_forecast'])
    expect(r.code).toBe(0)
    expect(r.out).toContain('decision: allow\n')
    expect(r.out).toContain('rule: everyone-reads-weather (./policies/main.yaml rules[0])\n')
    expect(r.out).toContain('dry run: no\n')
  })

  it('prints a deny with the deny rule and exits 3', () => {
    const r = run([
      '--server',
      'weather',
      '--tool',
      'delete_station',
      '--claims',
      '{"sub":"alice","groups":["eng"]}',
    ])
    expect(r.code).toBe(3)
    expect(r.out).toContain('decision: deny\n')
    expect(r.out).toContain('rule: no-deletes-anywhere')
    expect(r.out).toContain('deny wins over any allow')
    expect(r.out).toContain('caller: sub "alice"')
  })

  it('explains a default deny (no rule) and case variants', () => {
    const r = run(['--server', 'weather', '--tool', 'Get_forecast'])
    expect(r.code).toBe(3)
    expect(r.out).toContain('rule: (none)\n')
    expect(r.out).toContain('default deny')
  })

  it('applies claims: eng sees docs, an anonymous caller does not', () => {
    const args = ['--server', 'docs', '--resource', 'docs://readme']
    expect(run([...args, '--claims', '{"sub":"alice","groups":["eng","ops"]}']).code).toBe(0)
    expect(run([...args, '--claims', '{"sub":"bob","groups":["sales"]}']).code).toBe(3)
    expect(run(args).code).toBe(3)
  })

  it('explains a skill by its SKILL.md URI, and a file of it as a resource (docs/policy.md §Skills)', () => {
    const rules = `${RULES}  - name: refunds\n    servers: [docs]\n    allow: { skills: ["skill://refunds/*"] }\n  - name: no-inner\n    servers: ["*"]\n    deny: { skills: ["skill://refunds/inner/SKILL.md"] }\n`
    const allowed = run(['--server', 'docs', '--skill', 'skill://refunds/SKILL.md'], CONFIG, rules)
    expect(allowed.code).toBe(0)
    expect(allowed.out).toContain('target: skill "skill://refunds/SKILL.md" on server "docs"')
    expect(allowed.out).toContain('rule: refunds')
    const file = ['--server', 'docs', '--resource', 'skill://refunds/inner/notes.md']
    const denied = run(file, CONFIG, rules)
    expect(denied.code).toBe(3)
    expect(denied.out).toContain('rule: no-inner')
    const json = run(
      ['--server', 'docs', '--skill', 'skill://other/SKILL.md', '--json'],
      CONFIG,
      rules,
    )
    expect(json.code).toBe(3)
    expect(JSON.parse(json.out)).toMatchObject({ kind: 'skill', reason: 'default_deny' })
    expect(
      run(['--server', 'docs', '--skill', 'skill://a/../b/SKILL.md'], CONFIG, rules).out,
    ).toContain('reason: uri_not_normalized')
  })

  it('explains a method target (extraMethods): allowed only by a methods rule', () => {
    const rules = `${RULES}  - name: vendor\n    servers: [docs]\n    allow: { methods: ["x-docs/*"] }\n`
    const extra = CONFIG.replace(
      'docs: { upstreams: [{ url: "http://127.0.0.1:2/mcp" }] }',
      'docs: { upstreams: [{ url: "http://127.0.0.1:2/mcp" }], extraMethods: ["x-docs/*"] }',
    )
    const allowed = run(['--server', 'docs', '--method', 'x-docs/reindex'], extra, rules)
    expect(allowed.code).toBe(0)
    expect(allowed.out).toContain('target: method "x-docs/reindex" on server "docs"')
    expect(allowed.out).toContain('rule: vendor')
    expect(run(['--server', 'weather', '--method', 'x-docs/reindex'], extra, rules).code).toBe(3)
    // Without `extraMethods` the gateway answers it as an unknown method, whatever the rules say.
    const unknown = run(['--server', 'docs', '--method', 'x-docs/reindex'], CONFIG, rules)
    expect(unknown.code).toBe(3)
    expect(unknown.out).toBe(
      'decision: deny\nreason: method_not_found (refused before policy, as the gateway refuses it)\n',
    )
  })

  it('shows a dry-run "would deny" and exits 0, since the request goes through', () => {
    const r = run(['--server', 'weather', '--tool', 'get_slow'])
    expect(r.code).toBe(0)
    expect(r.out).toContain('decision: deny (dry run: not enforced, the request goes through)\n')
    expect(r.out).toContain('[mode: dry-run]')
    expect(r.out).toContain('dry run: yes\n')
  })

  it('prints JSON with --json', () => {
    const r = run(['--server', 'docs', '--prompt', 'summarize', '--json'])
    expect(r.code).toBe(3)
    expect(JSON.parse(r.out)).toMatchObject({
      decision: 'deny',
      enforced: true,
      kind: 'prompt',
      target: 'summarize',
      rule: null,
      reason: 'default_deny',
      dryRun: false,
    })
  })

  it('reports global dry run', () => {
    const r = run(
      ['--server', 'weather', '--tool', 'delete_station'],
      `policyMode: dry-run\n${CONFIG}`,
    )
    expect(r.code).toBe(0)
    expect(r.out).toContain('dry run: yes (policyMode: dry-run)')
  })

  it('exits 1 listing policy problems, 2 on usage errors', () => {
    const bad = run(
      ['--server', 'weather', '--tool', 'x'],
      CONFIG,
      'rules: [{ name: a, servers: [weather], alow: {} }]',
    )
    expect(bad.code).toBe(1)
    // Each problem at its file, line and column (config/located.ts).
    expect(bad.err).toContain('/policies/main.yaml:1:40: rules[0].alow: unknown key')
    expect(run(['--server', 'weather']).code).toBe(2)
    expect(run(['--server', 'weather', '--tool', 'a', '--prompt', 'b']).code).toBe(2)
    expect(run(['--server', 'nope', '--tool', 'a']).code).toBe(2)
    expect(run(['--server', 'weather', '--tool', 'a', '--claims', '[1]']).code).toBe(2)
    expect(run(['--server', 'weather', '--tool', 'a', '--bogus']).code).toBe(2)
  })

  it('allows everything when the config has no policies', () => {
    const r = run(
      ['--server', 'weather', '--tool', 'delete_station'],
      CONFIG.replace('policies: ./policies\n', ''),
    )
    expect(r.code).toBe(0)
    expect(r.out).toContain('no policies configured')
  })

  describe('on a virtual server', () => {
    const VIRTUAL = `${CONFIG}virtualServers:\n  all: { members: [weather, docs], prefix: always }\n`

    it('shows the own and the exposed name of a member tool', () => {
      const r = run(['--server', 'all', '--tool', 'weather_get_forecast'], VIRTUAL)
      expect(r.code).toBe(0)
      expect(r.out).toContain('member "weather"')
      expect(r.out).toContain('(own name "get_forecast", exposed "weather_get_forecast")')
      // A member's own name: what clients see it as under `prefix: always`.
      const own = run(['--server', 'all', '--tool', 'get_forecast'], VIRTUAL)
      expect(own.out).toContain('(own name "get_forecast", exposed "weather_get_forecast")')
    })

    it('names a fully shortened name as such, and decides nothing on a part of a name', () => {
      const long = `get_${'x'.repeat(60)}`
      const exposed = prefixedName('weather', long)
      expect(exposed.length).toBeLessThanOrEqual(63)
      const r = run(['--server', 'all', '--tool', exposed, '--json'], VIRTUAL)
      const out = JSON.parse(r.out) as { decision: string; members: Record<string, unknown>[] }
      expect(out.members).toEqual([
        { member: 'weather', via: 'shortened', exposed, startsWith: long.slice(0, 49) },
      ])
      expect(out.decision).toBe('deny')
      // Explained by the member's own name, on the member, the rule decides.
      const own = run(['--server', 'weather', '--tool', long])
      expect(own.code).toBe(0)
    })
  })
})
