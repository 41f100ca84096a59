import pino from 'pino'
import { compileAuth } from '../../../src/auth/compile.js'
import { describe, expect, it } from 'vitest'
import { ServerAdmission, type AdmitCall, type AdmitDeps } from '../../../src/endpoint/admit.js'
import { GatewayError } from '../../../src/errors.js'
import { clientAddress } from '../../../src/limits/client-ip.js'
import { Limiter } from '../../../src/limits/limiter.js'
import { compileLimit } from '../../../src/limits/rules.js'
import { LimitState } from '../../../src/limits/state.js'
import { ScopeGate } from '../../../src/auth/scopes.js'
import type { McpTarget } from '../../../src/mcp/classify.js'
import type { AuditLog } from '../../../src/observability/audit.js'
import { createMetrics } from '../../../src/observability/metrics.js'
import type { PolicySet } from '../../../src/policy/policy.js'
import { parseConfigText } from '../../../src/runtime/load.js'
import { policyOf } from '../policy/fixtures.js'

/**
 * The one admission (endpoint/admit.ts), row by row in the order of docs/design/check-order.md:
 * what each check decides, and that a refusal is taken before anything later runs.
 */

const RULES = `
rules:
  - { name: reads, servers: ["*"], allow: { tools: ["get_*"], resources: ["docs://*"], methods: ["x-docs/*"] } }
  - { name: no-bcc, servers: ["*"], deny: { tools: [send_email] }, if: 'has(args.bcc)' }
  - { name: mail, servers: ["*"], allow: { tools: [send_email] } }
`

interface Recorded {
  readonly records: unknown[]
  readonly refusals: unknown[]
  readonly limited: unknown[]
  readonly audit: AuditLog
}

function recorder(): Recorded {
  const records: unknown[] = []
  const refusals: unknown[] = []
  const limited: unknown[] = []
  return {
    records,
    refusals,
    limited,
    audit: {
      record: (e) => void records.push(e),
      rateLimited: (e) => void limited.push(e),
      accessRefused: (e) => void refusals.push(e),
      drift: () => undefined,
    },
  }
}

const SCOPED = parseConfigText(
  `
auth:
  publicUrl: https://mcp.example.com
  jwt: { issuer: https://idp, jwksUrl: https://idp/jwks.json }
servers:
  docs:
    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]
    scopes: { tools: { "write_*": [docs:write] }, resources: { "docs://secret/*": [docs:secret] } }
`,
  { dir: process.cwd() },
).config

function admission(
  opts: {
    policy?: PolicySet
    scopes?: boolean
    limit?: boolean
    extraMethods?: readonly string[]
  } = {},
) {
  const rec = recorder()
  const metrics = createMetrics(false)
  const limiting = opts.limit
    ? {
        limiter: new Limiter(
          [
            compileLimit({
              source: 'test',
              limit: { name: 'calls', servers: ['*'], tools: ['*'], key: 'none', rate: '1/minute' },
            }),
          ],
          new LimitState({ log: pino({ level: 'silent' }) }),
          1,
        ),
        audit: rec.audit,
        metrics,
        clientAddress: clientAddress([]),
        policyId: 'p',
      }
    : undefined
  const deps: AdmitDeps = {
    audit: rec.audit,
    metrics,
    scopes: opts.scopes ? ScopeGate.compile(SCOPED, compileAuth(SCOPED, process.cwd())) : undefined,
    policy: opts.policy,
    limiting,
    tracing: false,
  }
  const a = new ServerAdmission(
    { name: 'docs', config: { extraMethods: opts.extraMethods ?? [] } },
    deps,
  )
  return { a, rec, metrics }
}

function call(
  method: string | undefined,
  targets: readonly McpTarget[] = [],
  params: Record<string, unknown> = {},
  scopes: readonly string[] = [],
): AdmitCall {
  return {
    http: 'POST',
    requestId: 'r1',
    mcp: {
      era: 'modern',
      method,
      targets,
      message: { kind: 'request', method, params, rawId: '1' },
    },
    principal: {
      subject: 'alice',
      issuer: 'https://idp',
      claims: {},
      scopes: new Set(scopes),
      token: 't',
    },
    peer: '127.0.0.1',
    headers: {},
  }
}

const tool = (name: string): McpTarget => ({ kind: 'tool', name })
const resource = (uri: string): McpTarget => ({ kind: 'resource', uri })

function thrown(f: () => unknown): GatewayError {
  try {
    f()
  } catch (err) {
    if (err instanceof GatewayError) return err
    throw err
  }
  throw new Error('did not throw')
}

describe('ServerAdmission', () => {
  it('admits everything, decides nothing and awaits nothing without policy, scopes or limits', () => {
    const { a, rec } = admission()
    const admitted = a.admit(call('x-unknown/method', [tool('anything')]), 'docs')
    expect(admitted).toMatchObject({ kind: 'admitted', listFilter: undefined, release: undefined })
    expect(rec.records).toEqual([])
    expect(a.listView(undefined)).toBeUndefined()
  })

  it.each([
    ['an unknown method', 'x-docs/reindex', [], { kind: 'refused', outcome: 'method_not_found' }],
    [
      'a case variant of a known one, even with extraMethods',
      'TOOLS/CALL',
      ['*'],
      { kind: 'refused', outcome: 'method_not_found' },
    ],
    ['an extra method the rules allow', 'x-docs/reindex', ['x-docs/*'], { kind: 'admitted' }],
    [
      'an extra method no rule allows',
      'x-other/run',
      ['x-*'],
      { kind: 'refused', outcome: 'policy_denied', target: undefined },
    ],
  ] as const)('gates %s', (_what, method, extraMethods, expected) => {
    const { a } = admission({ policy: policyOf(RULES), extraMethods })
    expect(a.admit(call(method), 'docs')).toMatchObject(expected)
  })

  it('refuses an extra method with a control character before policy (400 invalid_name)', () => {
    const { a, rec } = admission({ policy: policyOf(RULES), extraMethods: ['x-*'] })
    expect(thrown(() => a.admit(call('x-docs/\u0007'), 'docs')).code).toBe('invalid_name')
    expect(rec.records).toEqual([])
  })

  it("gives a list method the caller's view, and judges no target of it", () => {
    const { a, rec } = admission({ policy: policyOf(RULES) })
    const admitted = a.admit(call('tools/list'), 'docs')
    expect(admitted).toMatchObject({ kind: 'admitted' })
    expect(admitted).toHaveProperty('listFilter', expect.anything())
    expect(rec.records).toEqual([])
  })

  it.each([
    ['policies', { policy: policyOf(RULES) }],
    ["the server's scopes", { scopes: true }],
  ] as const)('refuses a URI not in normal form with %s, before any target is judged', (_w, o) => {
    const { a, rec } = admission(o)
    const err = thrown(() =>
      a.admit(call('resources/read', [resource('docs://pages/../secret/x')]), 'docs'),
    )
    expect(err.code).toBe('uri_not_normalized')
    expect(rec.records).toEqual([])
    expect(rec.refusals).toEqual([])
  })

  it('refuses a skill URI not in normal form before policy: it resolves as a resource does', () => {
    const { a, rec } = admission({ policy: policyOf(RULES) })
    const skill = { kind: 'skill', name: 'skill://docs/../secret/SKILL.md' } as const
    expect(thrown(() => a.admit(call('skills/get', [skill]), 'docs')).code).toBe(
      'uri_not_normalized',
    )
    expect(rec.records).toEqual([])
  })

  it('forwards a URI not in normal form where nothing judges the server (as its endpoint does)', () => {
    const { a } = admission()
    const admitted = a.admit(call('resources/read', [resource('docs://pages/../x')]), 'docs')
    expect(admitted).toMatchObject({ kind: 'admitted' })
  })

  it('throws the 403 challenge naming the endpoint, audited, before policy', () => {
    const { a, rec } = admission({ policy: policyOf(RULES), scopes: true })
    const err = thrown(() => a.admit(call('tools/call', [tool('write_page')]), 'docs'))
    expect(err.code).toBe('insufficient_scope')
    expect(err.headers?.['www-authenticate']).toContain(
      'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/docs"',
    )
    expect(rec.refusals).toEqual([
      expect.objectContaining({ server: 'docs', target: tool('write_page') }),
    ])
    expect(rec.records).toEqual([])
    const ok = call('tools/call', [tool('write_page')], {}, ['docs:write'])
    expect(a.admit(ok, 'docs')).toMatchObject({ kind: 'refused', target: tool('write_page') })
  })

  it('judges every target with the call arguments, audited and counted; a denial names it', async () => {
    const { a, rec, metrics } = admission({ policy: policyOf(RULES) })
    const args = { to: 'a@b', bcc: 'c@d' }
    const denied = a.admit(call('tools/call', [tool('send_email')], { arguments: args }), 'docs')
    expect(denied).toEqual({
      kind: 'refused',
      target: tool('send_email'),
      outcome: 'policy_denied',
    })
    expect(rec.records).toEqual([
      expect.objectContaining({
        server: 'docs',
        requestId: 'r1',
        target: tool('send_email'),
        args,
      }),
    ])
    const allowed = call('tools/call', [tool('send_email')], { arguments: { to: 'a@b' } })
    expect(a.admit(allowed, 'docs')).toMatchObject({ kind: 'admitted' })
    const text = await metrics.registry.getSingleMetricAsString('mcp_edge_policy_decisions_total')
    expect(text).toContain('decision="deny"')
    expect(text).toContain('decision="allow"')
  })

  it('limits after judging: a denied call spends no quota; over the limit it throws 429', async () => {
    const { a, rec } = admission({ policy: policyOf(RULES), limit: true })
    expect(a.admit(call('tools/call', [tool('delete_all')]), 'docs')).toMatchObject({
      kind: 'refused',
    })
    const first = await a.admit(call('tools/call', [tool('get_page')]), 'docs')
    expect(first).toMatchObject({ kind: 'admitted' })
    expect(first).toHaveProperty('limitHeaders.ratelimit', expect.stringContaining('"calls"'))
    const second = a.admit(call('tools/call', [tool('get_page')]), 'docs')
    await expect(second).rejects.toMatchObject({ code: 'rate_limited' })
    expect(rec.limited).toHaveLength(1)
  })
})
