import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { checkCommand } from '../../../src/cli/check.js'

function check(file: string): { code: number; out: string; err: string } {
  let out = ''
  let err = ''
  const code = checkCommand(file, { out: (t) => (out += t), err: (t) => (err += t) })
  return { code, out, err }
}

function configFile(text: string, policy?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-check-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, text)
  if (policy !== undefined) {
    mkdirSync(join(dir, 'policies'))
    writeFileSync(join(dir, 'policies', 'main.yaml'), policy)
  }
  return file
}

describe('mcp-edge check', () => {
  it('sums up the shipped demo config in one line, virtual servers counted', () => {
    const r = check('deploy/gateway.demo.yaml')
    expect(r.err).toBe('')
    expect(r.code).toBe(0)
    expect(r.out).toBe(
      'deploy/gateway.demo.yaml: ok: 3 servers (4 replicas), 1 virtual server; policies: 6 rules, 1 limit (enforce); cache in memory; health checks on 2 servers; pinning (drift: hide, new tools: hide); listen 127.0.0.1:8080, admin 127.0.0.1:9090\n',
    )
  })

  it('names what a small config leaves out by leaving it out', () => {
    const file = configFile('servers:\n  a:\n    upstreams: [{ url: "http://127.0.0.1:9/mcp" }]\n')
    expect(check(file).out).toBe(
      `${file}: ok: 1 server (1 replica); no policies (everything allowed); listen 127.0.0.1:8080\n`,
    )
  })

  it('lists every problem at file:line:column with the lines around it, exit 1', () => {
    const file = configFile(
      'servers:\n  a:\n    upstreams: [{ url: "http://127.0.0.1:9/mcp" }]\n    trustHeader: true\n',
    )
    const r = check(file)
    expect(r.code).toBe(1)
    expect(r.out).toBe('')
    expect(r.err).toBe(
      [
        `${file}: 1 problem(s)`,
        `  ${file}:4:5: servers.a.trustHeader: unknown key (did you mean trustHeaders?)`,
        '    3 |     upstreams: [{ url: "http://127.0.0.1:9/mcp" }]',
        '  > 4 |     trustHeader: true',
        '      |     ^^^^^^^^^^^',
        '',
      ].join('\n'),
    )
  })

  it('reports a skills pattern that can match no SKILL.md URI at its place in the policy file', () => {
    const file = configFile(
      'servers:\n  a:\n    upstreams: [{ url: "http://127.0.0.1:9/mcp" }]\npolicies: ./policies\n',
      'rules:\n  - name: refunds\n    servers: [a]\n    allow:\n      skills: ["skill://refunds/*", "skill://refunds"]\n',
    )
    const r = check(file)
    expect(r.code).toBe(1)
    expect(r.out).toBe('')
    const policy = join(file, '..', 'policies', 'main.yaml')
    expect(r.err).toContain(`${file}: 1 problem(s)`)
    expect(r.err).toContain(
      `${policy}:5:37: rules[0].allow.skills[1]: "skill://refunds" can match no skill: a skill is named by the URI of its SKILL.md, which also decides its files (did you mean "skill://refunds/SKILL.md"?)`,
    )
    expect(r.err).toContain('  > 5 |       skills: ["skill://refunds/*", "skill://refunds"]')
  })
})
