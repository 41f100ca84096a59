import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { definitionDigest, modelView } from '../../../src/catalog/definition.js'
import { compareCatalogs, renderChanges } from '../../../src/catalog/diff.js'
import { parseLock, renderLock, type CatalogLock } from '../../../src/catalog/lock.js'
import { PinState } from '../../../src/catalog/pin-state.js'
import { SkillView } from '../../../src/catalog/skills.js'
import { GatewayError } from '../../../src/errors.js'
import type { DriftEvent } from '../../../src/observability/audit.js'

const sha = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`
const MAIN = '---\nname: refunds\ndescription: Refunds\n---\n'
const EMAIL = 'Dear customer\n'
const REFUNDS = {
  uri: 'skill://refunds/SKILL.md',
  frontmatter: { name: 'refunds', description: 'Refunds' },
  resources: [
    { uri: 'skill://refunds/SKILL.md', digest: sha(MAIN), size: MAIN.length },
    { uri: 'skill://refunds/examples/email.md', digest: sha(EMAIL), size: EMAIL.length },
  ],
}
const pinOf = (entry: Record<string, unknown>) => ({
  digest: definitionDigest('skills', entry),
  definition: modelView('skills', entry),
})
const LOCK: CatalogLock = {
  version: 1,
  servers: new Map([
    [
      'app',
      {
        tools: new Map(),
        prompts: new Map(),
        skills: new Map([[REFUNDS.uri, pinOf(REFUNDS)]]),
      },
    ],
  ]),
}

function code(fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

describe('the lock pins each skill manifest by its SKILL.md URI', () => {
  it('renders and reads back; a definition under another URI or a bad digest is refused', () => {
    const text = renderLock(LOCK)
    expect(text).toContain('    skills:\n      skill://refunds/SKILL.md:\n')
    expect(parseLock(text, 'x').servers.get('app')?.skills?.get(REFUNDS.uri)?.digest).toBe(
      pinOf(REFUNDS).digest,
    )
    expect(() =>
      parseLock(text.replace('uri: skill://refunds/SKILL.md', 'uri: skill://x/SKILL.md'), 'x'),
    ).toThrow(/definition.uri is not/)
    expect(() => parseLock(text.replace('Refunds', 'Refunds!'), 'x')).toThrow(
      /digest does not match/,
    )
    // A lock of servers without skills reads and renders as before (no skills key).
    const plain = renderLock({
      version: 1,
      servers: new Map([['app', { tools: new Map(), prompts: new Map() }]]),
    })
    expect(plain).not.toContain('skills')
  })

  it('pin --check names a changed skill', () => {
    const changed = { ...REFUNDS, frontmatter: { name: 'refunds', description: 'Now different' } }
    const now: CatalogLock = {
      version: 1,
      servers: new Map([
        [
          'app',
          {
            tools: new Map(),
            prompts: new Map(),
            skills: new Map([[REFUNDS.uri, pinOf(changed)]]),
          },
        ],
      ]),
    }
    const changes = compareCatalogs(LOCK, now)
    expect(changes).toMatchObject([{ kind: 'skills', name: REFUNDS.uri, change: 'changed' }])
    const text = renderChanges(changes, { color: false })
    expect(text).toContain('app: skill "skill://refunds/SKILL.md" changed')
    expect(text).toContain('+   description: Now different')
  })
})

describe('the catalog view of skills', () => {
  const drift: DriftEvent[] = []
  const view = (onDrift: 'hide' | 'warn' = 'hide', hidden: string[] = []) => {
    const pins = new PinState('app', LOCK.servers.get('app'), { onDrift, newTools: 'hide' }, (e) =>
      drift.push(e),
    )
    return { pins, skills: new SkillView(new Set(hidden), pins) }
  }

  it('shows the pinned manifest, hides a drifted or unpinned one, and refuses it from skills/get', () => {
    const { skills } = view()
    const drifted = { ...REFUNDS, resources: [REFUNDS.resources[0]] }
    const other = { ...REFUNDS, uri: 'skill://other/SKILL.md' }
    const listed = skills.apply('skills/list', { skills: [REFUNDS, other] })
    expect(listed.skills).toEqual([REFUNDS])
    expect(skills.apply('skills/list', { skills: [drifted] }).skills).toEqual([])
    expect(drift).toMatchObject([{ kind: 'skills', name: REFUNDS.uri, action: 'hidden' }])
    // skills/get is judged by the last listing: drifted now
    const get = { kind: 'skill', name: REFUNDS.uri } as const
    expect(skills.decide('skills/get', [get])).toEqual({ refuse: get })
    expect(code(() => skills.apply('skills/get', { skill: drifted }))).toBe('upstream_pin_mismatch')
  })

  it('checks a pinned file read byte for byte; refuses an unlisted file of a pinned skill', () => {
    const { skills } = view()
    const file = { kind: 'resource', uri: 'skill://refunds/examples/email.md' } as const
    const decided = skills.decide('resources/read', [file])
    if (decided === undefined || !('check' in decided)) throw new Error('expected a check')
    const ok = { contents: [{ uri: file.uri, text: EMAIL }] }
    expect(decided.check.apply('resources/read', ok)).toEqual(ok)
    const blob = { contents: [{ uri: file.uri, blob: Buffer.from(EMAIL).toString('base64') }] }
    expect(decided.check.apply('resources/read', blob)).toEqual(blob)
    for (const bad of [
      { contents: [{ uri: file.uri, text: 'Send your card number\n' }] },
      { contents: [{ uri: 'skill://refunds/SKILL.md', text: EMAIL }] },
      { contents: [{ uri: file.uri }] },
      { nothing: true },
    ])
      expect(code(() => decided.check.apply('resources/read', bad))).toBe('upstream_pin_mismatch')
    const added = { kind: 'resource', uri: 'skill://refunds/new.md' } as const
    expect(skills.decide('resources/read', [added])).toEqual({ refuse: added })
    const elsewhere = { kind: 'resource', uri: 'docs://readme' } as const
    expect(skills.decide('resources/read', [elsewhere])).toBeUndefined()
    // onDrift: warn relays what changed (lists report it).
    expect(view('warn').skills.decide('resources/read', [file])).toBeUndefined()
  })

  it('curation hides a skill, its files and the skills nested in it', () => {
    const { skills } = view('hide', ['skill://refunds/SKILL.md'])
    expect(skills.apply('skills/list', { skills: [REFUNDS] }).skills).toEqual([])
    for (const t of [
      { kind: 'skill', name: 'skill://refunds/SKILL.md' } as const,
      { kind: 'skill', name: 'skill://refunds/nested/SKILL.md' } as const,
      { kind: 'resource', uri: 'skill://refunds/examples/email.md' } as const,
      { kind: 'resource', uri: 'skill://refunds', directory: true } as const,
    ])
      expect(skills.decide(t.kind === 'skill' ? 'skills/get' : 'resources/read', [t])).toEqual({
        refuse: t,
      })
  })
})
