import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { SKILL_LIMITS, SkillAnswers, skillEntryProblem } from '../../../src/mcp/skill-answers.js'

const entry = (uri: string, files: number, size = 10) => ({
  uri,
  frontmatter: { name: 'x', description: 'y' },
  resources: Array.from({ length: files }, (_, i) => ({
    uri: i === 0 ? uri : `${uri.replace(/SKILL\.md$/, '')}f${i}.md`,
    digest: `sha256:${'0'.repeat(64)}`,
    size,
  })),
})

function code(fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

describe('skill entries the gateway relays (skills.mdx §Limits)', () => {
  it.each([
    [entry('skill://a/SKILL.md', 1), undefined],
    [entry('skill://a/SKILL.md', SKILL_LIMITS.files), undefined],
    [{ ...entry('skill://a/SKILL.md', 0), resources: 'dynamic' }, undefined],
    [entry('skill://a/SKILL.md', SKILL_LIMITS.files + 1), 'over the limit of 512'],
    [entry('skill://a/SKILL.md', 2, SKILL_LIMITS.bytes / 2 + 1), 'over the limit of 16777216'],
    [entry('skill://a/SKILL.md', 1, -1), 'has no byte count'],
    [{ uri: 'skill://a/SKILL.md', resources: {} }, 'neither a list nor "dynamic"'],
    [{ resources: [] }, 'without a string uri'],
  ])('%#', (e, problem) => {
    const found = skillEntryProblem(e)
    if (problem === undefined) expect(found).toBeUndefined()
    else expect(found).toContain(problem)
  })

  it('leaves an oversized skill out of a listing and refuses it from skills/get', () => {
    const ok = entry('skill://a/SKILL.md', 2)
    const big = entry('skill://big/SKILL.md', SKILL_LIMITS.files + 1)
    const listed = new SkillAnswers(undefined).apply('skills/list', {
      skills: [ok, big],
      ttlMs: 1,
    })
    expect(listed).toEqual({ skills: [ok], ttlMs: 1 })
    expect(
      code(() => new SkillAnswers('skill://big/SKILL.md').apply('skills/get', { skill: big })),
    ).toBe('upstream_skill_refused')
  })

  it('refuses a skills/get answer for another skill than the one judged', () => {
    const other = entry('skill://secret/SKILL.md', 1)
    const check = new SkillAnswers('skill://a/SKILL.md')
    expect(code(() => check.apply('skills/get', { skill: other }))).toBe('upstream_skill_refused')
    const own = entry('skill://a/SKILL.md', 1)
    expect(check.apply('skills/get', { skill: own, ttlMs: 5 })).toEqual({ skill: own, ttlMs: 5 })
    expect(check.key).not.toBe(new SkillAnswers('skill://b/SKILL.md').key)
  })
})
