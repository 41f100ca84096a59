import { describe, expect, it } from 'vitest'
import { explainCommand } from '../../../src/cli/explain.js'
import { CursorCodec } from '../../../src/virtual/cursor.js'
import { HANDLERS } from '../../../src/virtual/handlers.js'
import {
  buildNameTable,
  MAX_NAME,
  prefixedName,
  shortenedStart,
} from '../../../src/virtual/names.js'
import { matchesTemplate } from '../../../src/virtual/resources.js'
import { replaceParam } from '../../../src/mcp/rewrite.js'

describe('prefixed names', () => {
  it('is <member>_<name> while it fits, else shortens the member part deterministically', () => {
    expect(prefixedName('weather', 'get_forecast')).toBe('weather_get_forecast')
    const member = 'm'.repeat(50)
    const a = prefixedName(member, 'get_forecast') as string
    expect(a.length).toBeLessThanOrEqual(MAX_NAME)
    expect(a.endsWith('_get_forecast')).toBe(true)
    expect(prefixedName(member, 'get_forecast')).toBe(a)
    // Two members with the same head still differ (the hash covers the whole name).
    expect(prefixedName(`${'m'.repeat(49)}n`, 'get_forecast')).not.toBe(a)
    // A hash-only member part still fits: the own name is kept whole.
    expect(
      prefixedName('x'.repeat(20), 't'.repeat(MAX_NAME - 7)).endsWith(
        `_${'t'.repeat(MAX_NAME - 7)}`,
      ),
    ).toBe(true)
  })

  it('shortens the name part too when a hashed member part leaves no room, and says so', () => {
    const long = `${'t'.repeat(50)}_report`
    const a = prefixedName('member', long)
    expect(a.length).toBeLessThanOrEqual(MAX_NAME)
    expect(prefixedName('member', long)).toBe(a) // the same on every gateway
    // Names that share their first characters stay apart (the hash covers member and name).
    expect(prefixedName('member', `${'t'.repeat(50)}_summary`)).not.toBe(a)
    expect(prefixedName('other', long)).not.toBe(a)
    expect(shortenedStart('member', a)).toBe(long.slice(0, shortenedStart('member', a)?.length))
    expect(shortenedStart('other', a)).toBeUndefined()
    expect(shortenedStart('member', 'member_get_forecast')).toBeUndefined()
  })

  it('never lets two items claim one exposed name', () => {
    // b's prefixed `x_y` would equal member `b_x`'s plain... construct a clash: always mode.
    const t = buildNameTable(['a', 'a_b'], [new Set(['b_c']), new Set(['c'])], 'always')
    expect(t.routes.has('a_b_c')).toBe(false)
    expect(t.exposed[0]?.size).toBe(0)
    expect(t.exposed[1]?.size).toBe(0)
  })
})

describe('cursors', () => {
  const codec = new CursorCodec(Buffer.alloc(32, 1))
  it('open only for the list and server they were sealed for', () => {
    const c = codec.seal('ws', 'tools/list', [[1, 'abc']])
    expect(codec.open('ws', 'tools/list', c)).toEqual([[1, 'abc']])
    expect(codec.open('ws', 'prompts/list', c)).toBeUndefined()
    expect(codec.open('ws2', 'tools/list', c)).toBeUndefined()
    expect(new CursorCodec(Buffer.alloc(32, 2)).open('ws', 'tools/list', c)).toBeUndefined()
    expect(codec.open('ws', 'tools/list', `${c}A`)).toBeUndefined()
    expect(codec.open('ws', 'tools/list', 'no-dot')).toBeUndefined()
  })
})

describe('bounded rewrite', () => {
  it('replaces exactly one value and keeps every other byte', () => {
    const body = '{"id":18446744073709551617,"params":{"name":"a_x","arguments":{"name":"a_x"}}}'
    expect(replaceParam(body, ['name'], 'x')).toBe(
      '{"id":18446744073709551617,"params":{"name":"x","arguments":{"name":"a_x"}}}',
    )
    expect(replaceParam('{"params":{"ref":{"name":"p"}}}', ['ref', 'name'], 'q')).toBe(
      '{"params":{"ref":{"name":"q"}}}',
    )
    expect(replaceParam('{"params":{}}', ['name'], 'x')).toBeUndefined()
  })
})

describe('resource templates', () => {
  it('match expansions of their variables only', () => {
    expect(matchesTemplate('docs://pages/{name}', 'docs://pages/install')).toBe(true)
    expect(matchesTemplate('docs://pages/{name}', 'docs://other/install')).toBe(false)
    expect(matchesTemplate('a.b/{x}', 'aXb/1')).toBe(false)
  })
})

describe('mcp-edge explain on a virtual server', () => {
  function run(...args: string[]): { code: number; out: string } {
    let out = ''
    const code = explainCommand('deploy/gateway.demo.yaml', args, {
      out: (t) => void (out += t),
      err: (t) => void (out += t),
    })
    return { code, out }
  }

  it('names the member a prefixed name leads to and the rule that decided', () => {
    const denied = run('--server', 'workspace', '--tool', 'weather_delete_station')
    expect(denied.code).toBe(3)
    expect(denied.out).toContain('member "weather", the prefix names it')
    expect(denied.out).toContain('target: tool "delete_station" on server "weather"')
    expect(denied.out).toContain('rule: no-deletes-anywhere')
    const allowed = run('--server', 'workspace', '--tool', 'search_docs', '--json')
    expect(allowed.code).toBe(0)
    expect(JSON.parse(allowed.out)).toMatchObject({ virtualServer: 'workspace', decision: 'allow' })
  })
})

describe('the handler map', () => {
  it('answers discovery, lists, named calls, reads, skills, completions and task follow-ups', () => {
    expect(Object.keys(HANDLERS).sort()).toEqual(
      [
        'server/discover',
        'tools/list',
        'prompts/list',
        'resources/list',
        'resources/templates/list',
        'events/list',
        'tools/call',
        'prompts/get',
        'events/poll',
        'events/stream',
        'events/subscribe',
        'events/unsubscribe',
        'resources/read',
        'resources/directory/read',
        'skills/list',
        'skills/get',
        'completion/complete',
        'tasks/get',
        'tasks/result',
        'tasks/cancel',
        'tasks/update',
        'tasks/list',
      ].sort(),
    )
    expect(HANDLERS['constructor']).toBeUndefined()
  })
})
