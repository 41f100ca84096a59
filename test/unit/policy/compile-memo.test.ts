import { describe, expect, it } from 'vitest'
import { checkRule, compileRule, RuleMemo, type SourcedRule } from '../../../src/policy/compile.js'
import { ConditionSyntaxError } from '../../../src/policy/condition-static.js'
import { policyFileSchema } from '../../../src/policy/schema.js'
import { caller } from './fixtures.js'

/**
 * Rules compiled with one RuleMemo (src/policy/compile.ts) share what they can, and decide exactly
 * as rules compiled alone.
 */

function sourced(rules: unknown[]): SourcedRule[] {
  const file = policyFileSchema.parse({ rules })
  return (file.rules ?? []).map((rule, i) => ({ rule, source: `p.yaml rules[${i}]` }))
}

describe('RuleMemo', () => {
  it('gives rules with equal servers one matcher and one list', () => {
    const memo = new RuleMemo()
    const [a, b, c] = sourced([
      { name: 'a', servers: ['weather', 'docs'], allow: { tools: ['x'] } },
      { name: 'b', servers: ['weather', 'docs'], allow: { tools: ['y'] } },
      { name: 'c', servers: ['docs', 'weather'], allow: { tools: ['z'] } },
    ]).map((r) => compileRule(r, memo))
    expect(a?.servers).toBe(b?.servers)
    expect(a?.serverPatterns).toBe(b?.serverPatterns)
    // Another order is another list (rules report their servers as written).
    expect(c?.serverPatterns).not.toBe(a?.serverPatterns)
    for (const r of [a, b, c]) {
      expect(r?.servers('weather')).toBe(true)
      expect(r?.servers('weathe')).toBe(false)
    }
  })

  it('keeps one copy of a claim value that rules repeat, and decides as written', () => {
    const memo = new RuleMemo()
    const [a, b] = sourced([
      { name: 'a', when: { claims: { groups: 'team-platform-eng' } }, servers: ['s'], allow: {} },
      { name: 'b', when: { claims: { groups: 'team-platform-eng' } }, servers: ['t'], allow: {} },
    ]).map((r) => compileRule(r, memo))
    expect(a?.whenSpec).toEqual({ claims: { groups: 'team-platform-eng' } })
    expect(a?.when?.(caller({ groups: ['x', 'team-platform-eng'] }))).toBe(true)
    expect(b?.when?.(caller({ groups: 'team-platform-en' }))).toBe(false)
    expect(b?.when?.(undefined)).toBe(false)
  })

  it('keeps a claim named __proto__ an own claim of the rule', () => {
    // The schema refuses such a claim; the memo must not make one up or drop one either.
    // SECURITY: rebuilt as an ordinary assignment would, `__proto__` would set the prototype and
    // the rule would need no claim at all.
    const rule = compileRule(
      {
        rule: JSON.parse(
          '{"name":"p","when":{"claims":{"__proto__":"x"}},"servers":["s"],"allow":{}}',
        ) as SourcedRule['rule'],
        source: 'p.yaml rules[0]',
      },
      new RuleMemo(),
    )
    expect(Object.keys(rule.whenSpec?.claims ?? {})).toEqual(['__proto__'])
    expect(rule.when?.(caller({}))).toBe(false)
    expect(rule.when?.(caller(JSON.parse('{"__proto__":"x"}') as Record<string, unknown>))).toBe(
      true,
    )
  })

  it('decides every claim of a rule naming several', () => {
    const [rule] = sourced([
      { name: 'm', when: { claims: { groups: 'ops', tier: 2 } }, servers: ['s'], allow: {} },
    ]).map((r) => compileRule(r, new RuleMemo()))
    expect(rule?.when?.(caller({ groups: 'ops', tier: 2 }))).toBe(true)
    expect(rule?.when?.(caller({ groups: 'ops', tier: '2' }))).toBe(false)
    expect(rule?.when?.(caller({ tier: 2 }))).toBe(false)
  })
})

describe('checkRule', () => {
  it('gives the id compileRule gives, and refuses what compileRule refuses', () => {
    const [plain, conditional, broken] = sourced([
      { name: 'a', servers: ['docs'], allow: { tools: ['x'] } },
      { name: 'b', servers: ['docs'], allow: { tools: ['y'] }, unless: 'args.limit > 10' },
      { name: 'c', servers: ['docs'], allow: { tools: ['z'] }, if: 'args.limit >' },
    ])
    for (const r of [plain, conditional] as SourcedRule[])
      expect(checkRule(r).id).toBe(compileRule(r).id)
    expect(() => compileRule(broken as SourcedRule)).toThrow(ConditionSyntaxError)
    expect(() => checkRule(broken as SourcedRule)).toThrow(ConditionSyntaxError)
  })
})
