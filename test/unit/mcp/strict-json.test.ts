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
    ['{"params":{"na\\u006de":"x","name":"y"}}', 'escaped duplicate'],
    ['{"params":{"arguments":{"path":"/a","path":"/etc"}}}', 'exact duplicate argument'],
  ])('rejects %s (%s)', (text) => {
    expect(problem(text)).toBe('duplicate_key')
  })

  it.each([
    ['{"params":{"name":"read","Name":"delete_all"}}', 'both spellings in params'],
    ['{"Method":"tools/call","method":"tools/list"}', 'both spellings at the root'],
    ['{"METHOD":"tools/call"}', 'only the variant, at the root'],
    ['{"jsonrpc":"2.0","Params":{"name":"x"}}', 'Params'],
    ['{"ID":1}', 'ID'],
    ['{"JSONRPC":"2.0"}', 'JSONRPC'],
    ['{"params":{"Name":"delete_all"}}', 'params.Name alone'],
    ['{"params":{"URI":"file:///etc/passwd"}}', 'params.URI'],
    ['{"params":{"Ref":{"type":"ref/prompt","name":"x"}}}', 'params.Ref'],
    ['{"params":{"Arguments":{}}}', 'the arguments key itself'],
    ['{"params":{"CURSOR":"2"}}', 'params.CURSOR'],
    ['{"params":{"_Meta":{}}}', 'params._Meta'],
    ['{"params":{"TaskId":"t"}}', 'params.TaskId'],
    ['{"params":{"Task":{}}}', 'params.Task'],
    ['{"params":{"requeststate":"s"}}', 'params.requeststate'],
    ['{"params":{"ref":{"Type":"ref/prompt"}}}', 'params.ref.Type'],
    ['{"params":{"ref":{"NAME":"x"}}}', 'params.ref.NAME'],
    ['{"params":{"ref":{"Uri":"x"}}}', 'params.ref.Uri'],
    ['{"params":{"notifications":{"ResourceSubscriptions":["a://b"]}}}', 'ResourceSubscriptions'],
    ['{"params":{"notifications":{"toolslistchanged":true}}}', 'toolslistchanged'],
    [
      '{"params":{"_meta":{"io.modelcontextprotocol/ProtocolVersion":"2025-11-25"}}}',
      'an envelope key',
    ],
    [
      '{"params":{"_meta":{"IO.modelcontextprotocol/clientCapabilities":{}}}}',
      'the envelope prefix',
    ],
    ['{"params":{"uſe":1,"curſor":"2"}}', 'long s folds onto s in Go'],
    ['{"params":{"tasK":{}}}', 'Kelvin sign folds onto k in Go'],
    ['{"ıd":1}', 'dotless i folds onto i in Go'],
    ['{"params":{"na\\u004de":"x"}}', 'an escaped variant'],
    ['{"params":{"ref\\u0000":{"type":"ref/prompt","name":"x"}}}', 'a key a C reader ends at NUL'],
    ['{"params\\u0000x":{}}', 'NUL then anything'],
    ['{"params":{"Name\\u0000":"x"}}', 'case and NUL together'],
  ])('rejects a case variant of a deciding key: %s (%s)', (text) => {
    expect(problem(text)).toBe('case_variant_key')
  })

  it.each([
    ['{"params":{"arguments":{"Name":"a","URI":"b","Params":1}}}', 'inside arguments'],
    [
      '{"params":{"_meta":{"ProgressToken":1,"io.modelcontextprotocol/Other":2}}}',
      'other _meta keys',
    ],
    ['{"result":{"Name":"x","ID":1}}', 'inside a result'],
    ['{"params":{"ref":{"type":"ref/prompt","name":"x","Extra":1}}}', 'other ref keys'],
    ['{"params":{"notifications":{"Other":true}}}', 'other notification keys'],
    ['{"params":{"argument":{"Name":"a","value":""}}}', 'a completion argument'],
    ['{"x":{"params":{"Name":1}}}', 'a params object that is not the request params'],
    ['[{"METHOD":"x"}]', 'objects inside a batch array (refused as a batch instead)'],
  ])('never judges user data by case: %s (%s)', (text) => {
    expect(problem(text)).toBeUndefined()
  })

  it.each([
    ['{"__proto__":{}}'],
    ['{"params":{"constructor":{}}}'],
    ['{"params":{"prototype":1}}'],
    ['{"params":{"ref":{"__proto__":{}}}}'],
  ])('rejects prototype keys near the root: %s', (text) => {
    expect(problem(text)).toBe('prototype_key')
  })

  it('bounds nesting depth without recursing the stack away', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`
    expect(problem(deep)).toBe('too_deep')
    expect(problem(`${'['.repeat(10)}${']'.repeat(10)}`, 10)).toBeUndefined()
    expect(problem(`${'['.repeat(11)}${']'.repeat(11)}`, 10)).toBe('too_deep')
  })

  it('returns the raw text of the top-level id, byte for byte', () => {
    expect(scanJson('{"id":12345678901234567890,"x":{"id":1}}', opts).rawId).toBe(
      '12345678901234567890',
    )
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
    expect(() => scanJson('{"params":{"a":1,"b":2,"a":3}}', { maxDepth: 64 })).toThrow(
      JsonScanError,
    )
  })
})
