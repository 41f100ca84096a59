import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { createAuditLog } from '../../../src/observability/audit.js'
import { MAX_EXPORTED_CHARS } from '../../../src/observability/bound.js'
import { createLineSink } from '../../../src/observability/line-sink.js'
import { compileArgumentsView, type ArgumentsView } from '../../../src/observability/redact.js'
import { caller, policyOf } from '../policy/fixtures.js'

/** The two ways a decision is written: pino's serialiser, and by hand through the line sink. */
const WAYS = [
  ['through pino', false],
  ['serialised by hand', true],
] as const

const VIEWS = {
  redacted: compileArgumentsView(
    { arguments: 'redacted', maxArgumentBytes: 200, redaction: { paths: [], keys: [] } },
    Buffer.from('audit-test-key'),
  ),
  full: compileArgumentsView(
    { arguments: 'full', maxArgumentBytes: 200, redaction: { paths: [], keys: [] } },
    Buffer.from('audit-test-key'),
  ),
}

function captureWith(level: string, bySink: boolean, view?: ArgumentsView) {
  const lines: Record<string, unknown>[] = []
  const log = pino(
    { level },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  )
  const sink = bySink ? createLineSink(log, { batch: false }) : undefined
  if (bySink && sink === undefined) throw new Error('pino exposes no destination')
  return { audit: createAuditLog(log, sink, view), lines }
}

const policy = policyOf(`
rules:
  - { name: reads, servers: [weather], allow: { tools: ["get_*"] } }
  - { name: no-deletes, servers: ["*"], deny: { tools: ["delete_*"] } }
`)

describe.each(WAYS)('audit log, %s', (_way, bySink) => {
  const capture = (level: string) => captureWith(level, bySink)
  it('writes one line per decision with caller sub, iss and client, never the token or other claims', () => {
    const { audit, lines } = capture('info')
    const who = {
      ...caller({ groups: ['eng'], email: 'alice@example.com', azp: 'ide' }),
      token: 'eyJ.secret.token',
    }
    const target = { kind: 'tool', name: 'delete_station' } as const
    audit.record({
      caller: who,
      requestId: 'req-1',
      server: 'weather',
      method: 'tools/call',
      target,
      args: { station: 'x', password: 'secret-pw' },
      decision: policy.check(who, 'weather', target),
      policy: policy.id,
    })
    expect(lines).toHaveLength(1)
    const { level: _l, time: _t, pid: _p, hostname: _h, svc: _s, ...line } = lines[0]!
    // No `audit.arguments`: no arguments, whatever the call carried.
    expect(line).toEqual({
      audit: true,
      requestId: 'req-1',
      sub: 'alice',
      iss: 'https://idp.test',
      client: 'ide',
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

  it('writes the arguments as the view shows them: redacted, or full, and cut to its cap', () => {
    const target = { kind: 'tool', name: 'get_forecast' } as const
    const decision = policy.check(undefined, 'weather', target)
    const entry = { caller: undefined, requestId: 'r', server: 'weather', target, decision }
    const args = { city: 'Paris', password: 'hunter2' }
    const redacted = captureWith('info', bySink, VIEWS.redacted)
    redacted.audit.record({ ...entry, method: 'tools/call', args, policy: 'p' })
    expect(redacted.lines[0]?.arguments).toEqual({
      city: 'Paris',
      password: expect.stringMatching(/^\[redacted:[0-9a-f]{16}\]$/),
    })
    expect(redacted.lines[0]).not.toHaveProperty('argumentsTruncated')
    const full = captureWith('info', bySink, VIEWS.full)
    full.audit.record({ ...entry, method: 'tools/call', args, policy: 'p' })
    expect(full.lines[0]?.arguments).toEqual(args)
    const long = { text: 'z'.repeat(1000) }
    full.audit.record({ ...entry, method: 'tools/call', args: long, policy: 'p' })
    expect(full.lines[1]).toMatchObject({ argumentsTruncated: true, argumentsBytes: 1011 })
    // A method that carries no arguments has no field.
    full.audit.record({ ...entry, method: 'resources/read', args: undefined, policy: 'p' })
    expect(full.lines[2]).not.toHaveProperty('arguments')
  })

  it('records anonymous callers as null and dry-run denials as "would deny"', () => {
    const { audit, lines } = capture('info')
    const dry = policyOf('rules: []', 'dry-run')
    const target = { kind: 'resource', uri: 'docs://x' } as const
    audit.record({
      caller: undefined,
      requestId: 'r',
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
      requestId: 'r',
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
      requestId: 'r',
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
      requestId: 'r',
      server: 'weather',
      method: 'tools/call',
      target,
      decision: policy.check(undefined, 'weather', target),
      policy: 'p',
    })
    expect(lines[0]).toMatchObject({ truncated: true, decision: 'deny' })
    // The one bound on client-derived values (observability/bound.ts), its `…` included.
    expect(String(lines[0]?.target)).toHaveLength(MAX_EXPORTED_CHARS)
    expect(String(lines[0]?.target).endsWith('x…')).toBe(true)
  })
})

describe('audit lines serialised by hand', () => {
  it('read exactly as pino writes them, for every kind of decision and awkward names', () => {
    const dry = policyOf('rules: []', 'dry-run')
    const who = caller({})
    const cases = [
      { caller: who, target: { kind: 'tool', name: 'delete_station' }, p: policy },
      { caller: undefined, target: { kind: 'tool', name: 'get_forecast' }, p: policy },
      { caller: who, target: { kind: 'resource', uri: 'docs://a "quoted"\\path' }, p: dry },
      { caller: who, target: { kind: 'prompt', name: 'résumé ✓ \u2028' }, p: policy },
      { caller: who, target: { kind: 'tool', name: 'y'.repeat(5000) }, p: policy },
      { caller: who, target: { kind: 'method', name: 'vendor/x' }, p: policy },
    ] as const
    for (const { caller: c, target, p } of cases) {
      const byPino = captureWith('info', false, VIEWS.redacted)
      const byHand = captureWith('info', true, VIEWS.redacted)
      for (const { audit } of [byPino, byHand])
        audit.record({
          caller: c,
          requestId: 'a "quoted" id',
          server: 'weather',
          method: undefined,
          target,
          args: {
            note: 'ghp_16C7e42F292c6912E7710c838347Ae178B4a \u2028',
            list: ['x'.repeat(300)],
          },
          decision: p.check(c, 'weather', target),
          policy: p.id,
        })
      const strip = (l: Record<string, unknown> | undefined) => {
        const { time: _t, pid: _p, hostname: _h, svc: _s, ...rest } = l ?? {}
        return rest
      }
      expect(strip(byHand.lines[0])).toEqual(strip(byPino.lines[0]))
      expect(byHand.lines).toHaveLength(1)
    }
  })
})
