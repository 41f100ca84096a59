import fc from 'fast-check'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { createAuditLog } from '../../src/observability/audit.js'
import { createLineSink } from '../../src/observability/line-sink.js'
import { compileArgumentsView } from '../../src/observability/redact.js'
import { redactText } from '../../src/observability/redact-shapes.js'
import { policyOf } from '../unit/policy/fixtures.js'

/**
 * docs/operations.md "Audit log", what `redacted` guarantees: no string of a documented credential
 * shape reaches an audit line, whatever nests it and whatever text stands around it.
 */
const chars = (alphabet: string, min: number, max: number) =>
  fc.array(fc.constantFrom(...alphabet), { minLength: min, maxLength: max }).map((a) => a.join(''))
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'
const LOWER = 'abcdefghijklmnopqrstuvwxyz'
const DIGITS = '0123456789'
const ALNUM = UPPER + LOWER + DIGITS
const B64URL = ALNUM + '-_'

const bearer = fc
  .tuple(
    fc.constantFrom('Bearer', 'bearer', 'BEARER'),
    chars(' \t', 1, 3),
    chars(ALNUM + '-._~+/', 8, 60),
  )
  .map(([s, sp, t]) => `${s}${sp}${t}`)
const jwt = fc
  .tuple(chars(B64URL, 8, 40), chars(B64URL, 1, 60), chars(B64URL, 0, 43))
  .map(([h, p, s]) => `eyJ${h}.${p}.${s}`)
const pem = fc
  .tuple(
    fc.constantFrom('', 'RSA ', 'EC ', 'OPENSSH ', 'ENCRYPTED '),
    chars(ALNUM + '+/=\n', 0, 200),
    fc.boolean(),
  )
  .map(
    ([kind, body, ended]) =>
      `-----BEGIN ${kind}PRIVATE KEY-----\n${body}${ended ? `\n-----END ${kind}PRIVATE KEY-----` : ''}`,
  )
const aws = fc
  .tuple(fc.constantFrom('AKIA', 'ASIA'), chars(UPPER + DIGITS, 16, 16))
  .map(([p, r]) => p + r)
const github = fc.oneof(
  fc
    .tuple(fc.constantFrom('ghp_', 'gho_', 'ghs_', 'ghu_', 'ghr_'), chars(ALNUM, 36, 40))
    .map(([p, r]) => p + r),
  chars(ALNUM + '_', 22, 82).map((r) => `github_pat_${r}`),
)
const slack = fc
  .tuple(
    fc.constantFrom('xoxa-', 'xoxb-', 'xoxp-', 'xoxr-', 'xoxs-', 'xapp-'),
    chars(ALNUM + '-', 10, 60),
  )
  .map(([p, r]) => p + r)
const stripe = fc
  .tuple(fc.constantFrom('sk_live_', 'rk_live_', 'sk_test_'), chars(ALNUM, 16, 99))
  .map(([p, r]) => p + r)
/** A vendor `sk-` key: its random part always holds an upper-case letter and a digit. */
const skKey = fc
  .tuple(
    fc.constantFrom('sk-', 'sk-proj-', 'sk-ant-api03-'),
    chars(B64URL, 18, 80),
    fc.constantFrom(...UPPER),
    fc.constantFrom(...DIGITS),
  )
  .map(([p, r, u, d]) => `${p}${u}${r}${d}`)
const google = chars(B64URL, 35, 35).map((r) => `AIza${r}`)

const credential = fc.oneof(bearer, jwt, pem, aws, github, slack, stripe, skKey, google)

/** Text around a credential: anything, including letters and digits that touch it. */
const around = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ maxLength: 12, unit: 'grapheme' }),
  chars(ALNUM, 0, 6),
)

/** A credential inside a string, somewhere in a tree of objects and arrays. */
const planted = fc
  .tuple(around, credential, around)
  .map(([a, c, b]) => ({ secret: c, text: a + c + b }))

function nest(leaf: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  const { tree } = fc.letrec<{ tree: unknown }>((tie) => ({
    tree: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('tree'), { maxLength: 3 }),
      fc.dictionary(fc.string({ maxLength: 6 }), tie('tree'), { maxKeys: 3 }),
    ),
  }))
  return tree
}

const KEY = Buffer.from('property-test-hash-key')
const redacted = compileArgumentsView(
  { arguments: 'redacted', maxArgumentBytes: 1_000_000, redaction: { paths: [], keys: [] } },
  KEY,
)
if (redacted === undefined) throw new Error('redacted mode has a view')

function auditLine(args: unknown): string {
  const out: string[] = []
  const log = pino({ level: 'info' }, { write: (l: string) => void out.push(l) })
  const sink = createLineSink(log, { batch: false })
  const audit = createAuditLog(log, sink, redacted)
  const policy = policyOf('rules: []')
  const target = { kind: 'tool', name: 't' } as const
  audit.record({
    caller: undefined,
    requestId: 'r',
    server: 's',
    method: 'tools/call',
    target,
    args,
    decision: policy.check(undefined, 's', target),
    policy: policy.id,
  })
  return out.join('')
}

/** Every string of a value, member names included. */
function strings(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string') out.push(v)
  else if (Array.isArray(v)) for (const x of v) strings(x, out)
  else if (typeof v === 'object' && v !== null)
    for (const [k, x] of Object.entries(v)) {
      out.push(k)
      strings(x, out)
    }
  return out
}

describe('redaction property', () => {
  it('no planted credential reaches the audit line, in a value or a member name', () => {
    const planting = fc.tuple(
      nest(fc.oneof(fc.string(), fc.integer())),
      planted,
      fc.boolean(),
      fc.nat(),
    )
    fc.assert(
      fc.property(planting, ([tree, { secret, text }, asName, where]) => {
        const args = plantIn(tree, text, asName, where)
        const line = auditLine(args)
        const parsed = JSON.parse(line) as { arguments: unknown }
        expect(line).not.toContain(JSON.stringify(secret).slice(1, -1))
        // Nothing left in any shown string is of a shape the scan finds (it was all replaced).
        for (const s of strings(parsed.arguments)) expect(redactText(s, () => '!')).toBe(s)
      }),
      { numRuns: 400, seed: 20261201 },
    )
  })
})

/** `tree` with `text` planted as a string value, or as a member name, at a node `where` picks. */
function plantIn(tree: unknown, text: string, asName: boolean, where: number): unknown {
  const containers: (unknown[] | Record<string, unknown>)[] = []
  const collect = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) return
    containers.push(v as unknown[] | Record<string, unknown>)
    for (const x of Object.values(v)) collect(x)
  }
  const root = { wrap: tree }
  collect(root)
  const at = containers[where % containers.length] as unknown[] | Record<string, unknown>
  if (Array.isArray(at)) at.push(asName ? { [text]: 1 } : text)
  else if (asName) at[text] = 'v'
  else at[`k${where}`] = text
  return root
}
