import { describe, expect, it } from 'vitest'
import { callerLabel, shortHash } from '../../../src/status/caller.js'
import { DenialLog, RECENT_DENIALS } from '../../../src/status/denials.js'
import { LimitedCallers, LIMITED_WINDOW_MS, TOP_LIMITED } from '../../../src/status/limited.js'
import type { Decision } from '../../../src/policy/policy.js'

const denyBy = (rule: string | undefined): Decision =>
  ({
    allow: false,
    rule: rule === undefined ? undefined : { name: rule },
    reason: rule === undefined ? 'default_deny' : 'deny_rule',
    dryRun: false,
    conditions: [],
  }) as unknown as Decision

describe('callers on the page', () => {
  it('a short stable hash of issuer and subject, the same as sha256sum of "iss\\nsub"', () => {
    const label = callerLabel({ issuer: 'https://idp', subject: 'alice' }, false)
    expect(label).toMatch(/^[0-9a-f]{12}$/)
    expect(label).toBe(shortHash('https://idp\nalice'))
    expect(callerLabel({ issuer: 'https://idp', subject: 'alice' }, false)).toBe(label)
    expect(callerLabel({ issuer: 'https://idp', subject: 'bob' }, false)).not.toBe(label)
    expect(callerLabel(undefined, false)).toBe('anonymous')
  })
  it('with showSubjects, the subject and issuer, bounded', () => {
    expect(callerLabel({ issuer: 'https://idp', subject: 'alice' }, true)).toBe(
      'alice (https://idp)',
    )
    expect(callerLabel({ issuer: 'i', subject: 'x'.repeat(10_000) }, true).length).toBeLessThan(300)
  })
})

describe('DenialLog', () => {
  it('keeps the last 100 denials, newest first, and counts every one per rule', () => {
    let t = 0
    const log = new DenialLog(false, () => ++t)
    for (let i = 0; i < 250; i++)
      log.denied({
        caller: undefined,
        server: 'app',
        method: 'tools/call',
        target: { kind: 'tool', name: `tool_${i}` },
        decision: denyBy(i % 2 === 0 ? 'no-deletes' : undefined),
      })
    const r = log.report()
    expect(r.recent).toHaveLength(RECENT_DENIALS)
    expect(r.recent[0]?.target).toBe('tool_249')
    expect(r.recent[99]?.target).toBe('tool_150')
    expect(r.byRule).toEqual({ 'no-deletes': 125, '(default deny)': 125 })
  })
  it('bounds what it keeps: long targets are cut, rules past the cap share one counter', () => {
    const log = new DenialLog(false)
    const target = { kind: 'resource' as const, uri: `docs://${'a'.repeat(5000)}` }
    for (let i = 0; i < 1500; i++)
      log.denied({
        caller: undefined,
        server: 's',
        method: undefined,
        target,
        decision: denyBy(`r${i}`),
      })
    const r = log.report()
    expect(r.recent[0]?.target.length).toBeLessThanOrEqual(257)
    expect(Object.keys(r.byRule)).toHaveLength(1001)
    expect(r.byRule['(other)']).toBe(500)
  })
})

describe('DenialLog and conditions', () => {
  it('shows the condition that decided and counts its denials apart', () => {
    const log = new DenialLog(false)
    const target = { kind: 'tool' as const, name: 'send_email' }
    const by = (rule: string | undefined, conditions: Decision['conditions']): Decision =>
      ({ ...denyBy(rule), conditions }) as Decision
    log.denied({
      caller: undefined,
      server: 's',
      method: 'tools/call',
      target,
      decision: by('mail-inside-only', [
        { rule: 'mail-inside-only', kind: 'unless', value: false },
      ]),
    })
    log.denied({
      caller: undefined,
      server: 's',
      method: 'tools/call',
      target,
      decision: by(undefined, [{ rule: 'analysts', kind: 'if', value: false }]),
    })
    log.denied({
      caller: undefined,
      server: 's',
      method: 'tools/call',
      target,
      decision: by('analysts', [{ rule: 'analysts', kind: 'if', error: 'field not found: sql' }]),
    })
    log.denied({
      caller: undefined,
      server: 's',
      method: 'tools/call',
      target,
      decision: by('x', []),
    })
    const r = log.report()
    expect(r.recent.map((d) => d.condition)).toEqual([
      undefined,
      'analysts if: error',
      'analysts if: false',
      'mail-inside-only unless: false',
    ])
    expect(r.byRule).toEqual({
      'mail-inside-only (unless)': 1,
      '(default deny)': 1,
      'analysts (if)': 1,
      x: 1,
    })
  })
})

describe('LimitedCallers', () => {
  it('ranks the callers refused within the last minute, and forgets them after it', () => {
    let now = 10_000_000
    const limited = new LimitedCallers(false, () => now)
    const caller = (sub: string) => ({ issuer: 'idp', subject: sub })
    for (let i = 0; i < 30; i++)
      for (let n = 0; n <= i; n++)
        limited.refused({ caller: caller(`u${i}`), limit: 'calls', key: 'claim:sub' })
    const top = limited.report()
    expect(top).toHaveLength(TOP_LIMITED)
    expect(top[0]).toMatchObject({ limit: 'calls', key: 'claim:sub', refused: 30 })
    expect(top[0]?.caller).toBe(callerLabel(caller('u29'), false))
    now += LIMITED_WINDOW_MS
    expect(limited.report()).toEqual([])
  })
  it('tracks a bounded number of callers: an old one makes room and starts again from one', () => {
    let now = 0
    const limited = new LimitedCallers(true, () => now)
    for (let i = 0; i < 5000; i++) {
      now++
      limited.refused({ caller: { issuer: 'i', subject: `u${i}` }, limit: 'l', key: 'ip' })
    }
    limited.refused({ caller: { issuer: 'i', subject: 'u0' }, limit: 'l', key: 'ip' })
    limited.refused({ caller: { issuer: 'i', subject: 'u0' }, limit: 'l', key: 'ip' })
    expect(limited.report()[0]).toMatchObject({ caller: 'u0 (i)', refused: 2 })
  })
})
