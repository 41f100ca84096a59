import { describe, expect, it } from 'vitest'
import { skillPatternProblem } from '../../../src/policy/skill-reach.js'

describe('skillPatternProblem (docs/policy.md §Skills)', () => {
  it.each([
    '*',
    'skill://*',
    'skill://refunds/*',
    'skill://refunds/SKILL.md',
    'skill://acme/billing/refunds/SKILL.md',
    'gh://o/r/skills/refunds/SKILL.md',
    '*/SKILL.md',
    '*/refunds/SKILL.md',
    'skill://acme/*/SKILL.md',
    'skill://*.md',
    'skill:*',
  ])('accepts %s, which can match a SKILL.md URI', (pattern) => {
    expect(skillPatternProblem(pattern)).toBeUndefined()
  })

  it.each([
    ['skill://refunds', 'did you mean "skill://refunds/SKILL.md"?'],
    ['skill://refunds/', 'did you mean "skill://refunds/SKILL.md"?'],
    ['skill://refunds/examples/email.md', 'the URI of its SKILL.md'],
    ['skill://refunds/skill.md', 'the URI of its SKILL.md'],
    ['skill:///SKILL.md', 'the URI of its SKILL.md'],
    ['skill://refunds/*/notes.md', 'which also decides its files'],
    ['skill://refunds/*/', 'the URI of its SKILL.md'],
    ['refunds/SKILL.md', 'scheme included'],
    ['refunds/*', 'scheme included'],
  ])('reports %s, which can match no skill', (pattern, says) => {
    expect(skillPatternProblem(pattern)).toContain(says)
  })
})
