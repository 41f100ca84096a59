import { createHmac } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { parseRedactPath } from '../../../src/config/redact-paths.js'
import { pino } from 'pino'
import {
  argumentsViewFor,
  compileArgumentsView,
  MAX_ARGUMENT_DEPTH,
  redactionKey,
  redactionMark,
  type ArgumentsConfig,
  type ArgumentsView,
} from '../../../src/observability/redact.js'
import { looksGenerated, redactText } from '../../../src/observability/redact-shapes.js'

const KEY = Buffer.from('k'.repeat(32))
const MARK = /\[redacted:[0-9a-f]{16}\]/

function view(
  over: Partial<ArgumentsConfig> & { paths?: string[]; keys?: string[] } = {},
  key = KEY,
): ArgumentsView {
  const config: ArgumentsConfig = {
    arguments: over.arguments ?? 'redacted',
    maxArgumentBytes: over.maxArgumentBytes ?? 4096,
    redaction: { paths: over.paths ?? [], keys: over.keys ?? [] },
  }
  const v = compileArgumentsView(config, key)
  if (v === undefined) throw new Error('no view')
  return v
}

const shown = (args: unknown, v = view(), method = 'tools/call') => v(args, method).value

/** Each credential shape the docs list, as issuers print them. */
const CREDENTIALS: readonly [string, string][] = [
  ['bearer', 'Bearer abcDEF0123456789-._~+/xyz=='],
  ['bearer, any case', 'bearer 0123456789abcdefXYZ'],
  [
    'JWT',
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
  ],
  ['unsigned JWT', 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.'],
  [
    'PEM private key',
    '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\nabcd==\n-----END RSA PRIVATE KEY-----',
  ],
  ['PEM cut before its end', '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC'],
  [
    'OpenSSH private key',
    '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----',
  ],
  ['AWS access key id', 'AKIAIOSFODNN7EXAMPLE'],
  ['AWS temporary key id', 'ASIAY34FZKBOKMUTVV7A'],
  ['GitHub personal token', 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'],
  ['GitHub OAuth token', 'gho_16C7e42F292c6912E7710c838347Ae178B4a'],
  ['GitHub server token', 'ghs_16C7e42F292c6912E7710c838347Ae178B4a'],
  ['GitHub fine-grained token', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz'],
  ['Slack bot token', 'xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'],
  ['Slack user token', 'xoxp-1234567890-abcdefABCDEF'],
  ['Stripe live key', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'],
  ['Stripe restricted key', 'rk_live_4eC39HqLyjWDarjtT1zdp7dc'],
  ['OpenAI key', 'sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz012345'],
  ['Anthropic key', 'sk-ant-api03-Ab3dEf6hIj9kLmN0pQrStUvWxYz012345-AA'],
  ['Google API key', 'AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI'],
  ['generic generated secret', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'],
]

describe('credential shapes', () => {
  it.each(CREDENTIALS)('%s: redacted alone and inside a longer string', (_name, secret) => {
    const alone = redactText(secret, (s) => redactionMark(KEY, s))
    expect(alone).toMatch(MARK)
    expect(alone).not.toContain(secret)
    const inside = redactText(`before ${secret} after`, (s) => redactionMark(KEY, s))
    expect(inside.startsWith('before ')).toBe(true)
    expect(inside).not.toContain(secret)
    expect(inside).toMatch(MARK)
    expect(shown({ note: `x=${secret};` })).toEqual({ note: expect.not.stringContaining(secret) })
  })

  it('leaves ordinary text, identifiers, digests and slugs alone', () => {
    for (const text of [
      'The Bearer of bad news',
      'task-management-system-overview-2024',
      'risk-assessment-framework-for-teams',
      'getUserAccountSettingsForTenant2024Version',
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      '3b87b67a1f0d4c5e8f9a0b1c2d3e4f5a6b7c8d9e',
      '123e4567-e89b-12d3-a456-426614174000',
      'src/main/java/com/example/project/module',
      'https://example.com/a/b?c=d',
    ]) {
      expect(redactText(text, () => 'X')).toBe(text)
    }
  })

  it('takes long varied base64 for generated secrets, not long uniform runs', () => {
    expect(looksGenerated('wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY')).toBe(true)
    expect(looksGenerated('a'.repeat(60))).toBe(false)
    expect(looksGenerated('ABCDEFabcdef0123'.repeat(4))).toBe(false)
  })

  it('scans a crafted string in linear time', () => {
    const hostile =
      'bearer '.repeat(20_000) +
      'sk-'.repeat(20_000) +
      '-----BEGIN PRIVATE KEY-----' +
      '-'.repeat(50_000)
    const start = performance.now()
    redactText(hostile, () => 'X')
    expect(performance.now() - start).toBeLessThan(500)
  })
})

describe('key patterns and paths', () => {
  it('redacts the whole value under a credential-like name, any case, any type', () => {
    const out = shown({
      Password: 'hunter2',
      api_key: 12345,
      Authorization: 'Basic dXNlcjpwYXNz',
      credentials: { user: 'u', pass: 'p' },
      max_tokens: 100,
      city: 'Paris',
    }) as Record<string, unknown>
    expect(out.Password).toMatch(MARK)
    expect(out.api_key).toMatch(MARK)
    expect(out.Authorization).toMatch(MARK)
    expect(out.credentials).toMatch(MARK)
    // `*token*` also takes max_tokens: over-redacting a count costs nothing a secret would.
    expect(out.max_tokens).toMatch(MARK)
    expect(out.city).toBe('Paris')
    expect(JSON.stringify(out)).not.toMatch(/hunter2|12345|dXNlcjpwYXNz/)
  })

  it('adds configured key patterns to the built-in ones', () => {
    const out = shown(
      { ssn: '078-05-1120', x_internal_id: 'a', password: 'p' },
      view({ keys: ['SSN', 'x_internal_*'] }),
    )
    expect(out).toEqual({
      ssn: expect.stringMatching(MARK),
      x_internal_id: expect.stringMatching(MARK),
      password: expect.stringMatching(MARK),
    })
  })

  it('redacts values at configured paths: names, indices, wildcards', () => {
    const v = view({ paths: ['$.account.number', '$.cards[*].pan', '$.rows[1]', '$.meta.*'] })
    const out = shown(
      {
        account: { number: '12345678', name: 'Alice' },
        cards: [{ pan: '4111111111111111', exp: '12/30' }, { pan: '5500000000000004' }],
        rows: ['a', 'b', 'c'],
        meta: { a: 1, b: [2] },
        number: 'top-level is not $.account.number',
      },
      v,
    ) as {
      account: unknown
      cards: { pan: string }[]
      rows: unknown
      meta: unknown
      number: unknown
    }
    expect(out.account).toEqual({ number: expect.stringMatching(MARK), name: 'Alice' })
    expect(out.cards[0]).toEqual({ pan: expect.stringMatching(MARK), exp: '12/30' })
    expect(out.cards[1]?.pan).toMatch(MARK)
    expect(out.rows).toEqual(['a', expect.stringMatching(MARK), 'c'])
    expect(out.meta).toEqual({ a: expect.stringMatching(MARK), b: expect.stringMatching(MARK) })
    expect(out.number).toBe('top-level is not $.account.number')
  })

  it('finds shapes and names at any depth, in arrays, and in member names', () => {
    const token = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'
    const deep = {
      a: [{ b: [[{ c: `see ${token}` }]] }],
      [`k ${token}`]: 1,
      list: [{ secret: 'x' }],
    }
    const text = JSON.stringify(shown(deep))
    expect(text).not.toContain(token)
    expect(text).not.toContain('"x"')
    expect(text.match(new RegExp(MARK, 'g'))).toHaveLength(3)
  })

  it('judges the value of completion/complete under the name it gives', () => {
    const v = view()
    expect(shown({ name: 'password', value: 'hunt' }, v, 'completion/complete')).toEqual({
      name: 'password',
      value: expect.stringMatching(MARK),
    })
    expect(shown({ name: 'language', value: 'py' }, v, 'completion/complete')).toEqual({
      name: 'language',
      value: 'py',
    })
  })

  it('keeps a __proto__ member as data', () => {
    const args = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as unknown
    const out = shown(args) as Record<string, unknown>
    expect(Object.keys(out)).toEqual(['__proto__', 'a'])
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('parses only the documented path syntax', () => {
    expect(parseRedactPath('$.a.b_c-d[0][*].*')).toEqual([
      { kind: 'name', name: 'a' },
      { kind: 'name', name: 'b_c-d' },
      { kind: 'index', index: 0 },
      { kind: 'anyElement' },
      { kind: 'anyMember' },
    ])
    for (const bad of [
      'a.b',
      '$',
      '$..a',
      "$['a']",
      '$.a[01]',
      '$.a[-1]',
      '$.a b',
      '$.a.',
      '$[?(@.x)]',
    ])
      expect(typeof parseRedactPath(bad), bad).toBe('string')
  })
})

describe('keyed hash', () => {
  it('is equal for equal values wherever they stand, and differs per key', () => {
    const secret = 'AKIAIOSFODNN7EXAMPLE'
    const a = JSON.stringify(shown({ password: secret, note: `id ${secret}`, list: [secret] }))
    const marks = a.match(new RegExp(MARK, 'g'))
    expect(marks).toHaveLength(3)
    expect(new Set(marks).size).toBe(1)
    const other = JSON.stringify(shown({ password: secret }, view({}, Buffer.from('o'.repeat(32)))))
    expect(other.match(MARK)?.[0]).not.toBe(marks?.[0])
    expect(JSON.stringify(shown({ password: 'other' }))).not.toContain(marks?.[0])
  })

  it('is the first 16 hex digits of HMAC-SHA-256 over the value as JSON', () => {
    const hex = createHmac('sha256', KEY).update('"hunter2"').digest('hex').slice(0, 16)
    expect(shown({ password: 'hunter2' })).toEqual({ password: `[redacted:${hex}]` })
  })

  it('warns when markers use a per-process key, and only then', () => {
    const warnings: string[] = []
    const log = pino({ level: 'info' }, { write: (l: string) => void warnings.push(l) })
    const config = (mode: 'redacted' | 'full', hashKey?: string): ArgumentsConfig => ({
      arguments: mode,
      maxArgumentBytes: 4096,
      redaction: { paths: [], keys: [], hashKey },
    })
    expect(argumentsViewFor(config('redacted', 'a configured key!'), log)).toBeDefined()
    expect(argumentsViewFor(config('full'), log)).toBeDefined()
    expect(warnings).toHaveLength(0)
    argumentsViewFor(config('redacted'), log)
    expect(warnings).toEqual([expect.stringContaining('audit.redaction.hashKey is not set')])
  })

  it('takes the configured key, else one random key per process', () => {
    expect(redactionKey('a configured key!')).toEqual({
      key: Buffer.from('a configured key!'),
      generated: false,
    })
    const first = redactionKey(undefined)
    expect(first.generated).toBe(true)
    expect(first.key).toHaveLength(32)
    expect(redactionKey(undefined).key).toBe(first.key)
  })
})

describe('size cap', () => {
  const sizes = [64, 100, 257, 1000]
  it.each(sizes)('never exceeds %i bytes and always serialises to valid JSON', (max) => {
    const v = view({ maxArgumentBytes: max })
    const args = {
      text: 'é'.repeat(300) + '😀'.repeat(100),
      list: Array.from({ length: 200 }, (_, i) => ({ i, s: `item ${i}` })),
      nested: { a: { b: { c: 'x'.repeat(500) } } },
    }
    const { value, bytes } = v(args, 'tools/call')
    const text = JSON.stringify(value)
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(max)
    expect(() => JSON.parse(text) as unknown).not.toThrow()
    expect(bytes).toBe(Buffer.byteLength(JSON.stringify(args)))
    expect(text).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/)
  })

  it('shows arguments within the cap whole, with no size', () => {
    const args = { city: 'Paris', days: [1, 2, 3], ok: true, none: null }
    expect(view()(args, 'tools/call')).toEqual({ value: args, bytes: undefined })
  })

  it('cuts a long string with a mark and keeps what came before it', () => {
    const { value, bytes } = view({ maxArgumentBytes: 100 })(
      { a: 'short', b: 'y'.repeat(1000), c: 'after' },
      'tools/call',
    )
    const out = value as Record<string, string>
    expect(out.a).toBe('short')
    expect(out.b).toMatch(/^y+…$/)
    expect(out.c).toBeUndefined()
    expect(bytes).toBeGreaterThan(1000)
  })

  it('never shows part of a credential a cut would split', () => {
    const secret = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'
    for (let max = 20; max < 120; max++) {
      const text = JSON.stringify(
        view({ maxArgumentBytes: max })({ n: `${'z'.repeat(30)} ${secret}` }, 'tools/call').value,
      )
      expect(text).not.toContain('ghp_16C7e42F')
    }
  })

  it('cuts containers deeper than the bound', () => {
    let deep: unknown = 'leaf'
    for (let i = 0; i < MAX_ARGUMENT_DEPTH + 10; i++) deep = { d: deep }
    const { value, bytes } = view({ maxArgumentBytes: 100_000 })(deep, 'tools/call')
    expect(JSON.stringify(value)).not.toContain('leaf')
    expect(bytes).toBeGreaterThan(0)
  })

  it('full mode shows the arguments as sent, within the same cap', () => {
    const args = { password: 'hunter2', token: 'AKIAIOSFODNN7EXAMPLE' }
    expect(shown(args, view({ arguments: 'full' }))).toEqual(args)
    const cut = view({ arguments: 'full', maxArgumentBytes: 30 })(args, 'tools/call')
    expect(Buffer.byteLength(JSON.stringify(cut.value))).toBeLessThanOrEqual(30)
  })

  it('none computes nothing', () => {
    expect(
      compileArgumentsView(
        { arguments: 'none', maxArgumentBytes: 4096, redaction: { paths: [], keys: [] } },
        KEY,
      ),
    ).toBeUndefined()
  })
})
