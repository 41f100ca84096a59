import { describe, expect, it } from 'vitest'
import type { McpTarget } from '../../../src/mcp/classify.js'
import {
  compileDeadlines,
  deadlineOf,
  type DeadlineConfig,
  type DeadlineEvent,
} from '../../../src/upstream/deadlines.js'

const tool = (name: string): McpTarget[] => [{ kind: 'tool', name }]
const prompt = (name: string): McpTarget[] => [{ kind: 'prompt', name }]

function compiled(cfg: DeadlineConfig, events: DeadlineEvent[] = []) {
  const d = compileDeadlines('app', cfg, (e) => void events.push(e))
  if (d === undefined) throw new Error('expected deadlines')
  return d
}

describe('deadline selection: the most specific key wins', () => {
  it('compiles to nothing when no table has a key (the common case carries nothing)', () => {
    expect(compileDeadlines('app', {}, () => undefined)).toBeUndefined()
    expect(compileDeadlines('app', { methods: {}, tools: {} }, () => undefined)).toBeUndefined()
  })

  it('an exact name beats every pattern, whatever the order of keys', () => {
    const d = compiled({ tools: { '*': 1000, 'slow_*': 2000, slow_report: 3000 } })
    expect(d.rule('tools/call', tool('slow_report'))?.ms).toBe(3000)
    const reversed = compiled({ tools: { slow_report: 3000, 'slow_*': 2000, '*': 1000 } })
    expect(reversed.rule('tools/call', tool('slow_report'))?.ms).toBe(3000)
  })

  it('among patterns, more literal characters win, then fewer wildcards', () => {
    const d = compiled({ tools: { '*': 1000, 'slow_*': 2000, 'slow_rep*': 4000, 's*o*w*': 5000 } })
    expect(d.rule('tools/call', tool('slow_report'))?.ms).toBe(4000)
    expect(d.rule('tools/call', tool('slow_x'))?.ms).toBe(2000)
    expect(d.rule('tools/call', tool('other'))?.ms).toBe(1000)
    // `slow_*` and `s*o*w_` have five literal characters each: one `*` beats three.
    const tie = compiled({ tools: { 's*l*o*w_': 7000, 'slow_*': 6000 } })
    expect(tie.rule('tools/call', tool('slow_'))?.ms).toBe(6000)
  })

  it('equally specific patterns that both match give the shorter deadline, in any order', () => {
    const a = compiled({ tools: { 'a*': 9000, '*a': 8000 } })
    const b = compiled({ tools: { '*a': 8000, 'a*': 9000 } })
    expect(a.rule('tools/call', tool('aa'))?.ms).toBe(8000)
    expect(b.rule('tools/call', tool('aa'))?.ms).toBe(8000)
    expect(a.rule('tools/call', tool('ab'))?.ms).toBe(9000)
  })

  it("a tool's own deadline beats its method's, which beats nothing", () => {
    const d = compiled({ methods: { 'tools/call': 30_000 }, tools: { 'slow_*': 600_000 } })
    expect(d.rule('tools/call', tool('slow_report'))).toEqual({
      ms: 600_000,
      table: 'tools',
      key: 'slow_*',
    })
    expect(d.rule('tools/call', tool('get_forecast'))).toEqual({
      ms: 30_000,
      table: 'methods',
      key: 'tools/call',
    })
    expect(d.rule('tools/list', [])).toBeUndefined()
  })

  it('prompts have their own table, and a prompt name never selects a tool deadline', () => {
    const d = compiled({ tools: { summarize: 1000 }, prompts: { 'sum*': 2000 } })
    expect(d.rule('prompts/get', prompt('summarize'))?.ms).toBe(2000)
    expect(d.rule('tools/call', tool('summarize'))?.ms).toBe(1000)
    // A resource or a method carries no tool name.
    expect(d.rule('resources/read', [{ kind: 'resource', uri: 'summarize' }])).toBeUndefined()
  })

  it('method keys take patterns too', () => {
    const d = compiled({ methods: { 'resources/*': 5000, 'resources/read': 2000 } })
    expect(d.rule('resources/read', [])?.ms).toBe(2000)
    expect(d.rule('resources/list', [])?.ms).toBe(5000)
    expect(d.rule('tools/list', [])).toBeUndefined()
  })

  it('matches names byte for byte: no case folding, no trimming, no normalisation', () => {
    const d = compiled({ tools: { search: 1000, 'get_*': 2000 } })
    expect(d.rule('tools/call', tool('Search'))).toBeUndefined()
    expect(d.rule('tools/call', tool('search '))).toBeUndefined()
    expect(d.rule('tools/call', tool('ｓearch'))).toBeUndefined()
    expect(d.rule('tools/call', tool('GET_x'))).toBeUndefined()
  })

  it('a request deadline reports once, with the caller, server, method and name', () => {
    const events: DeadlineEvent[] = []
    const d = compiled({ tools: { 'slow_*': 100 } }, events)
    const caller = { issuer: 'https://issuer', subject: 'alice' }
    const r = d.forRequest('tools/call', tool('slow_report'), caller)
    expect(r?.ms).toBe(100)
    r?.expired('head')
    r?.expired('stream')
    expect(events).toEqual([
      {
        server: 'app',
        method: 'tools/call',
        name: 'slow_report',
        rule: { ms: 100, table: 'tools', key: 'slow_*' },
        phase: 'head',
        caller,
      },
    ])
    expect(d.forRequest('tools/call', tool('fast'), undefined)).toBeUndefined()
  })
})

describe('deadlineOf (what explain shows)', () => {
  const timeouts = { responseHeadersMs: 30_000, tools: { 'slow_*': 600_000 } }

  it("names the rule that applies, the server's head timeout, or none for a stream", () => {
    expect(deadlineOf(timeouts, 'tools/call', tool('slow_report'))).toEqual({
      kind: 'own',
      ms: 600_000,
      source: 'timeouts.tools["slow_*"]',
    })
    expect(deadlineOf(timeouts, 'tools/call', tool('get_forecast'))).toEqual({
      kind: 'server',
      ms: 30_000,
    })
    expect(deadlineOf({ ...timeouts, methods: { '*': 1 } }, 'subscriptions/listen', [])).toEqual({
      kind: 'stream',
    })
  })
})
