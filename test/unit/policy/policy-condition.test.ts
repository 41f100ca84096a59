import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import type { McpTarget } from '../../../src/mcp/classify.js'
import { compileCondition, conditionInput } from '../../../src/policy/condition.js'
import { ConditionSyntaxError } from '../../../src/policy/condition-static.js'
import { MAX_VALUES, toCelValue } from '../../../src/policy/condition-values.js'
import { loadPolicySet } from '../../../src/policy/load.js'
import { caller, policyOf, tempFolder } from './fixtures.js'

const TOOL: McpTarget = { kind: 'tool', name: 'run_query' }

function run(expr: string, args: unknown = {}, target: McpTarget = TOOL) {
  return compileCondition(expr, 'if').evaluate(
    conditionInput(caller({ groups: ['analysts'], azp: 'cli' }), 'warehouse', target, args),
  )
}

/** The two conditions of docs/policy.md, read from YAML exactly as written there. */
const YAML = parse(String.raw`
query: 'args.database == "analytics" && !args.sql.matches("(?i)\\b(drop|delete|update)\\b")'
mail: 'args.to.all(a, a.endsWith("@example.com"))'
`) as { query: string; mail: string }

describe('CEL conformance subset (cel-spec simple tests @bufbuild/cel passes)', () => {
  // From cel-spec tests/simple/testdata: basic, comparisons, integer_math, fp_math, lists,
  // logic, macros, string. Each row: expression, expected value.
  it.each([
    ['self_eval_int_zero', '0 == 0', true],
    ['int_eq_double', '1 == 1.0', true],
    ['uint_lt_int', '1u < 2', true],
    ['double_ne_nan', '0.0/0.0 != 0.0/0.0', true],
    ['string_concat', '"abc" + "def" == "abcdef"', true],
    ['list_in', '2 in [1, 2, 3]', true],
    ['map_in', '"a" in {"a": 1}', true],
    ['and_error_short_circuit', 'false && (1 / 0 == 1)', false],
    ['or_error_short_circuit', 'true || (1 / 0 == 1)', true],
    ['all_list', '[1, 2, 3].all(x, x > 0)', true],
    ['exists_one', '[1, 2, 3].exists_one(x, x == 2)', true],
    ['map_filter', '[1, 2, 3].filter(x, x > 1).size() == 2', true],
    ['ternary', '(1 > 2 ? "a" : "b") == "b"', true],
    ['size_unicode', 'size("\u00e9\\U0001F600") == 2', true],
    ['string_escapes', '"\\b" == "\u0008" && r"\b" == "\\b"', true],
    ['contains', '"hello".contains("ell")', true],
    ['starts_ends', '"hello".startsWith("he") && "hello".endsWith("lo")', true],
    ['int_conversion', 'int("42") == 42', true],
    ['has_macro', 'has({"a": 1}.a) && !has({"a": 1}.b)', true],
  ])('%s', (_name, expr, want) => {
    expect(run(expr)).toEqual({ value: want })
  })

  it.each([
    ['divide_by_zero', '1 / 0 == 1'],
    ['int_overflow', '9223372036854775807 + 1 == 0'],
    ['no_such_key', '{"a": 1}.b == 1'],
    ['index_out_of_range', '[1][3] == 1'],
    ['no_overload', '1 + "a" == "1a"'],
  ])('%s is an error, never a value', (_name, expr) => {
    expect(run(expr)).toHaveProperty('error')
  })
})

describe('variables', () => {
  it('args, claims, server, target, kind, client', () => {
    expect(run('args.database == "analytics"', { database: 'analytics' })).toEqual({ value: true })
    expect(run('"analysts" in claims.groups')).toEqual({ value: true })
    expect(run('server == "warehouse" && target == "run_query" && kind == "tool"')).toEqual({
      value: true,
    })
    expect(run('client == "cli"')).toEqual({ value: true })
    const uri: McpTarget = { kind: 'resource', uri: 'docs://a' }
    expect(run('target == "docs://a" && kind == "resource"', undefined, uri)).toEqual({
      value: true,
    })
  })

  it('client is azp, else client_id, else ""', () => {
    const c = compileCondition('client', 'if')
    const of = (claims: Record<string, unknown>) =>
      c.evaluate(conditionInput(caller(claims), 's', TOOL, {}))
    expect(of({ client_id: 'b' })).toEqual({ error: 'evaluates to a string, not a bool' })
    const eq = (claims: Record<string, unknown> | undefined, want: string) =>
      compileCondition(`client == ${JSON.stringify(want)}`, 'if').evaluate(
        conditionInput(claims === undefined ? undefined : caller(claims), 's', TOOL, {}),
      )
    expect(eq({ azp: 'a', client_id: 'b' }, 'a')).toEqual({ value: true })
    expect(eq({ client_id: 'b' }, 'b')).toEqual({ value: true })
    expect(eq(undefined, '')).toEqual({ value: true })
    // A present azp that is no string names no client, as for `clients:` (match/clients.ts).
    expect(eq({ azp: 7, client_id: 'b' }, '')).toEqual({ value: true })
  })

  it('a missing key or a wrong type is an error', () => {
    expect(run('args.sql == "x"', {})).toEqual({ error: 'field not found: sql' })
    expect(run('args.n > "a"', { n: 1 })).toHaveProperty('error')
  })

  it('JSON numbers are doubles that compare with ints', () => {
    expect(run('args.n == 10 && args.n < 11 && args.n >= 10u', { n: 10 })).toEqual({ value: true })
  })
})

describe('the documented examples, as written in YAML', () => {
  it('analysts-query-analytics', () => {
    expect(YAML.query).toContain(String.raw`\\b(drop`)
    const sql = (s: string) => run(YAML.query, { database: 'analytics', sql: s })
    expect(sql('select * from events')).toEqual({ value: true })
    expect(sql('SELECT 1; DrOp TABLE events')).toEqual({ value: false })
    expect(sql('update t set a = 1')).toEqual({ value: false })
    // \b is a word boundary: "updated_at" is no UPDATE statement.
    expect(sql('select updated_at from t')).toEqual({ value: true })
    expect(run(YAML.query, { database: 'sales', sql: 'select 1' })).toEqual({ value: false })
  })

  it('mail-inside-only', () => {
    expect(run(YAML.mail, { to: ['a@example.com', 'b@example.com'] })).toEqual({ value: true })
    expect(run(YAML.mail, { to: ['a@example.com', 'c@evil.test'] })).toEqual({ value: false })
    expect(run(YAML.mail, { to: 'a@example.com' })).toHaveProperty('error')
  })
})

describe('matches is RE2 (re2js), never JavaScript RegExp', () => {
  it('(?i) and RE2-only syntax work', () => {
    expect(run('"DROP".matches("(?i)^drop$")')).toEqual({ value: true })
    expect(run('"ab".matches("\\\\Aab\\\\z")')).toEqual({ value: true })
  })

  it('a pattern catastrophic for backtracking runs in linear time', () => {
    // (a+)+$ against a^n! backtracks exponentially in JavaScript RegExp.
    const s = `${'a'.repeat(50_000)}!`
    const started = performance.now()
    expect(run('args.s.matches("(a+)+$")', { s })).toEqual({ value: false })
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('JavaScript-only syntax is refused at load', () => {
    // Lookahead exists in JavaScript RegExp, not in RE2.
    expect(() => compileCondition('args.s.matches("a(?=b)")', 'if')).toThrow(/invalid RE2 pattern/)
  })

  it('a pattern built at run time is RE2 too; an invalid one is an error', () => {
    expect(run('"DROP".matches(args.p)', { p: '(?i)drop' })).toEqual({ value: true })
    expect(run('"x".matches(args.p)', { p: '(' })).toHaveProperty('error')
  })
})

describe('inputs', () => {
  it('integers beyond ±(2^53 - 1) are refused, safe ones are exact', () => {
    // JSON.parse rounds 9007199254740993 to 9007199254740992: the condition never sees either.
    const big = JSON.parse('{"n": 9007199254740993}') as unknown
    expect(run('args.n == 9007199254740992', big)).toEqual({
      error: 'a number beyond ±(2^53 - 1) cannot be compared exactly',
    })
    expect(run('true', JSON.parse('{"a": [-9007199254740992]}'))).toHaveProperty('error')
    expect(run('args.n == 9007199254740991', { n: Number.MAX_SAFE_INTEGER })).toEqual({
      value: true,
    })
  })

  it('a deep input converts without recursion; a huge one is refused', () => {
    let deep: unknown = 'x'
    for (let i = 0; i < 5_000; i++) deep = [deep]
    expect(run('size(args.d) == 1', { d: deep })).toEqual({ value: true })
    const huge = { l: Array.from({ length: MAX_VALUES }, (_, i) => i) }
    expect(run('true', huge)).toEqual({ error: `the input holds more than ${MAX_VALUES} values` })
  })

  it('lone surrogates, in values or keys, are refused; pairs are text', () => {
    expect(run('args.s == "x"', { s: '\ud800' })).toEqual({
      error: 'a string holds an unpaired surrogate (no Unicode text)',
    })
    expect(run('true', { ['\udc00']: 1 })).toHaveProperty('error')
    expect(run('args.s == "\\U0001F600"', { s: '\u{1F600}' })).toEqual({ value: true })
  })

  it('__proto__ is a plain key', () => {
    const args = JSON.parse('{"__proto__": {"admin": true}}') as unknown
    expect(run('args.__proto__.admin', args)).toEqual({ value: true })
    expect(run('has(args.admin)', args)).toEqual({ value: false })
  })

  it('an input that would cost too much is refused before evaluation', () => {
    const l = Array.from({ length: 3_000 }, (_, i) => i)
    expect(run('args.l.all(x, args.l.all(y, x == y || x != y))', { l })).toHaveProperty(
      'error',
      expect.stringMatching(/^cost limit exceeded/),
    )
    expect(run('args.l.all(x, x >= 0)', { l })).toEqual({ value: true })
  })

  it('converts JSON to maps and lists', () => {
    expect(toCelValue({ a: [1, null, true, 'x'] })).toEqual({
      value: new Map([['a', [1, null, true, 'x']]]),
      values: 6,
      chars: 2,
    })
  })
})

describe('errors at load name line and column', () => {
  it.each([
    ['args.x +', 1, 8, /expecting/],
    ['arg.x == 1', 1, 1, /undeclared reference to "arg"/],
    ['args.x == 1 && nope(1)', 1, 16, /no function nope/],
    ['args.s.size(1) == 0', 1, 7, /no function \.size taking 1/],
    ['args.s.matches("(")', 1, 16, /invalid RE2 pattern/],
    ['google.protobuf.Int64Value{value: 1} == 1', 1, 1, /no message types/],
    ['args.a ==\n  nope', 2, 3, /undeclared reference to "nope"/],
    ['x.all(y, y)', 1, 1, /undeclared reference to "x"/],
  ])('%j', (expr, line, column, message) => {
    let err: unknown
    try {
      compileCondition(expr, 'if')
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(ConditionSyntaxError)
    expect(err).toMatchObject({ line, column, message: expect.stringMatching(message) })
  })

  it('comprehension variables are declared inside their comprehension only', () => {
    expect(() => compileCondition('args.to.all(a, a != "")', 'if')).not.toThrow()
    expect(() => compileCondition('args.to.all(a, true) && a == ""', 'if')).toThrow(/"a"/)
  })

  it('refuses conditions past the size limits', () => {
    expect(() => compileCondition('true || '.repeat(600) + 'true', 'if')).toThrow(/longer than/)
    const nested = 'args.l.all(a, args.l.all(b, args.l.all(c, args.l.all(d, true))))'
    expect(() => compileCondition(nested, 'if')).toThrow(/nest deeper than 3/)
  })
})

describe('rules with conditions (PolicySet.check)', () => {
  const RULES = String.raw`
rules:
  - name: analysts-query-analytics
    when: { claims: { groups: analysts } }
    servers: [weather]
    allow: { tools: ["run_query"] }
    if: 'args.database == "analytics" && !args.sql.matches("(?i)\\b(drop|delete|update)\\b")'
  - name: mail
    servers: [weather]
    allow: { tools: ["send_email"] }
  - name: mail-inside-only
    servers: ["*"]
    deny: { tools: ["send_email"] }
    unless: 'args.to.all(a, a.endsWith("@example.com"))'
  - name: everything-else
    servers: [docs]
    allow: { tools: ["*"] }
  - name: docs-strict
    servers: [docs]
    allow: { tools: ["lookup"] }
    if: 'args.q.size() < 10'
`
  const policy = policyOf(RULES)
  const analyst = caller({ groups: ['analysts'] })

  it('if narrows an allow; unless narrows a deny; deny wins', () => {
    const q = (args: unknown) => policy.check(analyst, 'weather', tool('run_query'), args)
    expect(q({ database: 'analytics', sql: 'select 1' })).toMatchObject({
      allow: true,
      reason: 'allow_rule',
      conditions: [{ rule: 'analysts-query-analytics', kind: 'if', value: true }],
    })
    expect(q({ database: 'sales', sql: 'select 1' })).toMatchObject({
      allow: false,
      reason: 'default_deny',
      conditions: [{ rule: 'analysts-query-analytics', kind: 'if', value: false }],
    })
    // `when` comes first: a caller it does not match never evaluates the condition.
    expect(policy.check(caller(), 'weather', tool('run_query'), {})).toMatchObject({
      allow: false,
      conditions: [],
    })
    const mail = (to: unknown) => policy.check(analyst, 'weather', tool('send_email'), { to })
    expect(mail(['a@example.com'])).toMatchObject({ allow: true, rule: { name: 'mail' } })
    expect(mail(['a@example.com', 'b@other.test'])).toMatchObject({
      allow: false,
      reason: 'deny_rule',
      rule: { name: 'mail-inside-only' },
    })
  })

  it('a condition that cannot be evaluated denies, even where another rule allows', () => {
    expect(
      policy.check(analyst, 'weather', tool('send_email'), { to: 'a@example.com' }),
    ).toMatchObject({ allow: false, reason: 'condition_error', rule: { name: 'mail-inside-only' } })
    expect(policy.check(analyst, 'weather', tool('send_email'), undefined)).toMatchObject({
      allow: false,
      reason: 'condition_error',
      conditions: [{ rule: 'mail-inside-only', kind: 'unless', error: 'field not found: to' }],
    })
    // everything-else allows lookup without a condition; docs-strict's error still denies.
    expect(policy.check(analyst, 'docs', tool('lookup'), { q: 1 })).toMatchObject({
      allow: false,
      reason: 'condition_error',
      rule: { name: 'docs-strict' },
    })
    expect(policy.check(analyst, 'docs', tool('lookup'), { q: 'short' })).toMatchObject({
      allow: true,
      rule: { name: 'everything-else' },
    })
    // A rule whose names do not match evaluates nothing.
    expect(policy.check(analyst, 'docs', tool('other'), { q: 1 })).toMatchObject({
      allow: true,
      conditions: [],
    })
  })

  it('lists are filtered on names alone: conditional allows list, conditional denies do not hide', () => {
    const filter = policy.listFilter(analyst, 'weather')
    const listed = filter?.apply('tools/list', {
      tools: [{ name: 'run_query' }, { name: 'send_email' }, { name: 'other' }],
    })
    expect(listed?.['tools']).toEqual([{ name: 'run_query' }, { name: 'send_email' }])
  })

  it('knows which servers have conditions', () => {
    expect(policy.hasConditions('weather')).toBe(true)
    expect(
      policyOf('rules: [{name: a, servers: [docs], allow: {tools: ["*"]}}]').hasConditions('docs'),
    ).toBe(false)
  })

  it('dry run evaluates conditions once and lets the call through', () => {
    const dry = policyOf(RULES, 'dry-run')
    expect(
      dry.check(analyst, 'weather', tool('run_query'), { database: 'sales', sql: '' }),
    ).toMatchObject({ allow: true, dryRun: true, conditions: [{ value: false }] })
  })
})

describe('conditions at policy load', () => {
  it('names file, rule, field, line and column', () => {
    const dir = tempFolder({
      'a.yaml': `rules:
  - name: ok
    servers: [weather]
    allow: { tools: ["*"] }
  - name: broken
    servers: [weather]
    allow: { tools: ["*"] }
    unless: |-
      args.x == 1 &&
        nope
`,
    })
    expect(() =>
      loadPolicySet({ folder: dir, label: 'policies', mode: 'enforce', servers: ['weather'] }),
    ).toThrow('policies/a.yaml rules[1].unless: line 2, column 3: undeclared reference to "nope"')
  })

  it('refuses a rule with both if and unless', () => {
    const dir = tempFolder({
      'a.yaml': `rules:
  - { name: both, servers: [weather], allow: { tools: ["*"] }, if: "true", unless: "false" }
`,
    })
    expect(() =>
      loadPolicySet({ folder: dir, label: 'policies', mode: 'enforce', servers: ['weather'] }),
    ).toThrow('policies/a.yaml: rules[0].unless: a rule has if or unless, not both')
  })
})

describe('policies/examples/conditions.yaml', () => {
  it('means what its comments say', () => {
    const policy = loadPolicySet({
      folder: fileURLToPath(new URL('../../../policies/examples', import.meta.url)),
      label: 'policies/examples',
      mode: 'enforce',
      servers: ['weather', 'docs', 'internal-wiki', 'acme-billing'],
    })
    const analyst = caller({ groups: ['analysts'] })
    const query = (sql: string) =>
      policy.check(analyst, 'warehouse-eu', tool('run_query'), { database: 'analytics', sql })
    expect(query('select 1').allow).toBe(true)
    expect(query('DELETE FROM events').allow).toBe(false)
    const mail = (to: unknown) => policy.check(analyst, 'weather', tool('send_email'), { to })
    expect(mail(['x@elsewhere.test'])).toMatchObject({ allow: false, reason: 'deny_rule' })
    expect(mail('x@example.com')).toMatchObject({ allow: false, reason: 'condition_error' })
    const page: McpTarget = { kind: 'resource', uri: 'docs://internal/handbook' }
    expect(policy.check(caller({ azp: 'docs-portal' }), 'docs', page).allow).toBe(true)
    expect(policy.check(caller({ client_id: 'other' }), 'docs', page)).toMatchObject({
      allow: false,
      rule: { name: 'docs-internal-through-the-portal' },
    })
  })
})

function tool(name: string): McpTarget {
  return { kind: 'tool', name }
}
