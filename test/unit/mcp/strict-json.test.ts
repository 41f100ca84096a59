import { describe, expect, it } from 'vitest'
import { JsonScanError, scanJson } from '../../../src/mcp/strict-json.js'

const opts = { maxDepth: 64 }

function problem(text: string, maxDepth = 64): string | undefined {
  try {
    scanJson(text, { maxDepth })
    return undefined
  } catch (err) {
    if (err instanceof JsonScanError) return err.kind
    throw err
  }
}

describe('scanJson', () => {
  it.each([
    ['{}'],
    ['{"a":1,"b":[1,2,{"c":null}],"d":"x\\u00e9\\n","e":-1.5e3,"f":true,"g":false}'],
    [' \n\t{ "jsonrpc" : "2.0" , "id" : 1 } \r\n'],
    ['[1,2,3]'],
    ['"just a string"'],
    ['{"params":{"arguments":{"name":"a","NAME":"b"}}}'], // case variants deep in arguments are data
  ])('accepts valid JSON %s', (text) => {
    expect(problem(text)).toBeUndefined()
    expect(() => JSON.parse(text)).not.toThrow()
  })

  it.each([
    ['{"a":1,}'],
    ['{"a":1'],
    ['{a:1}'],
    ["{'a':1}"],
    ['{"a":01}'],
    ['{"a":"\u0001"}'],
    ['{"a":"\\x"}'],
    ['{"a":1} x'],
    ['{"a":tru}'],
    [''],
    ['{"a":"\\u12"}'],
    ['[1,]'],
  ])('rejects malformed JSON %j as syntax', (text) => {
    expect(problem(text)).toBe('syntax')
  })

  it.each([
    ['{"method":"a","method":"b"}', 'duplicate at the root'],
    ['{"params":{"name":"read","name":"delete_all"}}', 'duplicate params.name'],
    ['{"params":{"ref":{"uri":"a","uri":"b"}}}', 'duplicate params.ref.uri'],
    ['{"params":{"name":"read","Name":"delete_all"}}', 'case-variant policy key'],
    ['{"Method":"tools/call","method":"tools/list"}', 'case-variant method'],
    ['{"params":{"na\\u006de":"x","name":"y"}}', 'escaped duplicate'],
    ['{"params":{"arguments":{"path":"/a","path":"/etc"}}}', 'exact duplicate argument'],
  ])('rejects %s (%s)', (text) => {
    expect(problem(text)).toBe('duplicate_key')
  })

  it.each([['{"__proto__":{}}'], ['{"params":{"constructor":{}}}'], ['{"params":{"prototype":1}}']])(
    'rejects prototype keys near the root: %s',
    (text) => {
      expect(problem(text)).toBe('prototype_key')
    },
  )

  it('bounds nesting depth without recursing the stack away', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`
    expect(problem(deep)).toBe('too_deep')
    expect(problem(`${'['.repeat(10)}${']'.repeat(10)}`, 10)).toBeUndefined()
    expect(problem(`${'['.repeat(11)}${']'.repeat(11)}`, 10)).toBe('too_deep')
  })

  it('returns the raw text of the top-level id, byte for byte', () => {
    expect(scanJson('{"id":12345678901234567890,"x":{"id":1}}', opts).rawId).toBe('12345678901234567890')
    expect(scanJson('{"x":{"id":1},"id":"a\\"b\\u00e9"}', opts).rawId).toBe('"a\\"b\\u00e9"')
    expect(scanJson('{"x":1}', opts).rawId).toBeUndefined()
    expect(scanJson('[{"id":1}]', opts)).toEqual({ rawId: undefined, isArray: true })
  })
})

describe('scanJson on large objects', () => {
  // The cost itself is the bench's business, not a unit test's; this pins correctness past the
  // point where KeySet switches from an array to a Set.
  it('checks 10,000 keys in params and still finds a duplicate (reliability A-53)', () => {
    const keys = Array.from({ length: 10_000 }, (_, i) => `"k${i}":${i}`).join(',')
    const text = `{"jsonrpc":"2.0","id":1,"method":"x","params":{${keys}}}`
    const dup = `{"params":{${keys},"k9999":0}}`
    expect(scanJson(text, { maxDepth: 64 }).rawId).toBe('1')
    expect(() => scanJson(dup, { maxDepth: 64 })).toThrow(JsonScanError)
    expect(() => scanJson('{"params":{"a":1,"b":2,"a":3}}', { maxDepth: 64 })).toThrow(JsonScanError)
  })
})
