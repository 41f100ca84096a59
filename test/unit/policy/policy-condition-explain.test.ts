import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { explainCommand } from '../../../src/cli/explain.js'
import { tempFolder } from './fixtures.js'

const CONFIG = `
policies: ./policies
servers:
  warehouse: { upstreams: [{ url: "http://127.0.0.1:1/mcp" }] }
virtualServers:
  all: { members: [warehouse] }
`
const RULES = String.raw`
rules:
  - name: analysts-query-analytics
    when: { claims: { groups: analysts } }
    servers: [warehouse]
    allow:
      tools: ["run_query"]
    if: 'args.database == "analytics" && !args.sql.matches("(?i)\\b(drop|delete|update)\\b")'
  - name: mail-inside-only
    servers: ["*"]
    deny: { tools: ["send_email"] }
    unless: 'args.to.all(a, a.endsWith("@example.com"))'
`

function run(args: string[]): { code: number; out: string; err: string } {
  const dir = tempFolder({ 'gateway.yaml': CONFIG, 'policies/main.yaml': RULES })
  let out = ''
  let err = ''
  const file = join(dir, 'gateway.yaml')
  const code = explainCommand(file, ['--config', file, ...args], {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
  })
  return { code, out, err }
}

const ANALYST = ['--claims', '{"sub":"ann","groups":["analysts"]}']

describe('mcp-edge explain --args', () => {
  it('shows the condition that decided, true or false', () => {
    const query = (args: string) =>
      run(['--server', 'warehouse', '--tool', 'run_query', ...ANALYST, '--args', args])
    const no = query('{"database":"sales","sql":"select 1"}')
    expect(no.code).toBe(3)
    expect(no.out).toContain('conditions: analysts-query-analytics if: false\n')
    const yes = query('{"database":"analytics","sql":"select 1"}')
    expect(yes.code).toBe(0)
    expect(yes.out).toContain('rule: analysts-query-analytics')
    expect(yes.out).toContain('conditions: analysts-query-analytics if: true\n')
  })

  it('shows an evaluation error, which denies', () => {
    const r = run(['--server', 'warehouse', '--tool', 'send_email', '--args', '{"to":"x"}'])
    expect(r.code).toBe(3)
    expect(r.out).toContain("reason: a matching rule's condition could not be evaluated")
    expect(r.out).toMatch(/conditions: mail-inside-only unless: error \(.+\)\n/)
  })

  it('without --args a condition sees no arguments; --json lists the conditions', () => {
    const r = run(['--server', 'warehouse', '--tool', 'run_query', ...ANALYST, '--json'])
    expect(JSON.parse(r.out)).toMatchObject({
      decision: 'deny',
      reason: 'condition_error',
      conditions: [
        { rule: 'analysts-query-analytics', kind: 'if', error: 'field not found: database' },
      ],
    })
  })

  it('explains a virtual server by its member, with the same arguments', () => {
    const r = run(['--server', 'all', '--tool', 'send_email', '--args', '{"to":["a@example.com"]}'])
    expect(r.out).toContain('conditions: mail-inside-only unless: true\n')
    // Nothing allows send_email: the deny did not apply, so it is the default deny.
    expect(r.code).toBe(3)
  })

  it('refuses --args that is no JSON object', () => {
    const r = run(['--server', 'warehouse', '--tool', 'run_query', '--args', '[1]'])
    expect(r.code).toBe(2)
    expect(r.err).toContain('--args must be a JSON object')
  })
})
