import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { createAuditLog } from '../../../src/observability/audit.js'
import { caller, policyOf } from '../policy/fixtures.js'

function capture(level: string) {
  const lines: Record<string, unknown>[] = []
  const log = pino(
    { level },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  )
  return { audit: createAuditLog(log), lines }
}

const policy = policyOf(`
rules:
  - { name: reads, servers: [weather], allow: { tools: ["get_*"] } }
  - { name: no-deletes, servers: ["*"], deny: { tools: ["delete_*"] } }
`)

describe('audit log', () => {
  it('writes one line per decision with caller sub and iss, never the token or other claims', () => {
    const { audit, lines } = capture('info')
    const who = {
      ...caller({ groups: ['eng'], email: 'alice@example.com' }),
      token: 'eyJ.secret.token',
    }
    const target = { kind: 'tool', name: 'delete_station' } as const
    audit.record({
      caller: who,
      server: 'weather',
      method: 'tools/call',
      target,
      decision: policy.check(who, 'weather', target),
      policy: policy.id,
    })
    expect(lines).toHaveLength(1)
    const { level: _l, time: _t, pid: _p, hostname: _h, ...line } = lines[0]!
    expect(line).toEqual({
      audit: true,
      sub: 'alice',
      iss: 'https://idp.test',
      server: 'weather',
      method: 'tools/call',
      kind: 'tool',
      target: 'delete_station',
      decision: 'deny',
      rule: 'no-deletes',
      reason: 'deny_rule',
      dryRun: false,
      policy: 'test',
      msg: 'policy denied',
    })
    expect(JSON.stringify(lines)).not.toMatch(/secret|eng|alice@example/)
  })

  it('records anonymous callers as null and dry-run denials as "would deny"', () => {
    const { audit, lines } = capture('info')
    const dry = policyOf('rules: []', 'dry-run')
    const target = { kind: 'resource', uri: 'docs://x' } as const
    audit.record({
      caller: undefined,
      server: 'docs',
      method: 'resources/read',
      target,
      decision: dry.check(undefined, 'docs', target),
      policy: dry.id,
    })
    expect(lines[0]).toMatchObject({
      sub: null,
      iss: null,
      target: 'docs://x',
      decision: 'deny',
      dryRun: true,
      rule: null,
      reason: 'default_deny',
      msg: 'policy would deny (dry run)',
    })
  })

  it('still writes when the log level is above info, but not when silent', () => {
    const target = { kind: 'tool', name: 'get_forecast' } as const
    const decision = policy.check(undefined, 'weather', target)
    const quiet = capture('error')
    quiet.audit.record({
      caller: undefined,
      server: 'weather',
      method: 'tools/call',
      target,
      decision,
      policy: 'p',
    })
    expect(quiet.lines).toHaveLength(1)
    expect(quiet.lines[0]).toMatchObject({
      decision: 'allow',
      rule: 'reads',
      msg: 'policy allowed',
    })
    const silent = capture('silent')
    silent.audit.record({
      caller: undefined,
      server: 'weather',
      method: 'tools/call',
      target,
      decision,
      policy: 'p',
    })
    expect(silent.lines).toHaveLength(0)
  })

  it('cuts very long target names so a caller cannot bloat the log', () => {
    const { audit, lines } = capture('info')
    const target = { kind: 'tool', name: 'x'.repeat(100_000) } as const
    audit.record({
      caller: undefined,
      server: 'weather',
      method: 'tools/call',
      target,
      decision: policy.check(undefined, 'weather', target),
      policy: 'p',
    })
    expect(lines[0]).toMatchObject({ truncated: true, decision: 'deny' })
    expect(String(lines[0]?.target)).toHaveLength(1025)
  })
})
