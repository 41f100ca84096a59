import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { JsonScanError, scanJson, type ScanResult } from '../../../src/mcp/strict-json.js'

const opts = { maxDepth: 64 }

/** What one mode of the scan says: the problem's kind, or the result. */
function outcome(text: string, maxDepth: number, fast: boolean): string | ScanResult {
  try {
    return scanJson(text, { maxDepth, fast })
  } catch (err) {
    if (err instanceof JsonScanError) return err.kind
    throw err
  }
}

function parses(text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * The strict scan's problem with `text`. On valid JSON the fast mode must say exactly the same
 * (it is exact there), so every case below checks both modes.
 */
function problem(text: string, maxDepth = 64): string | undefined {
  const strict = outcome(text, maxDepth, false)
  if (parses(text)) expect(outcome(text, maxDepth, true)).toEqual(strict)
  return typeof strict === 'string' ? strict : undefined
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

describe('scanJson fast mode', () => {
  const fast = (text: string, maxDepth = 64) => outcome(text, maxDepth, true)
  const kind = (o: string | ScanResult) => (typeof o === 'string' ? o : undefined)

  // Each crossed subtree (below `arguments`) is followed by keys the scan still judges, so a
  // crossing that ends one character early or late shows as a missed or invented problem.
  it.each([
    ['{"params":{"arguments":{"a":{"s":"x\\"y"},"b":1,"b":2}}}', 'escaped quote', 'duplicate_key'],
    [
      '{"params":{"arguments":{"a":{"s":"x\\\\"},"b":1,"b":2}}}',
      'escaped backslash before the quote',
      'duplicate_key',
    ],
    [
      '{"params":{"arguments":{"a":{"s":"\\\\\\"\\\\"},"b":1,"b":2}}}',
      'an escaped backslash, then an escaped quote',
      'duplicate_key',
    ],
    [
      '{"params":{"arguments":{"a":"x\\\\","b":1,"b":2}}}',
      'a crossed value string ending in \\\\',
      'duplicate_key',
    ],
    [
      '{"params":{"arguments":{"a":"\\",\\"b\\":1,\\"b\\":\\"","b":2}}}',
      'keys quoted inside a string',
      undefined,
    ],
    [
      '{"params":{"arguments":{"a":{"s":"\\"},\\"b\\":1,\\"b\\":{\\""},"b":2}}}',
      'the same, deeper',
      undefined,
    ],
    [
      '{"params":{"arguments":{"a":{"s":"}}]]{{[["},"b":1,"b":2}}}',
      'brackets inside a string',
      'duplicate_key',
    ],
    [
      '{"params":{"arguments":{"a":["{\\"name\\":1}",{"x":"]"}],"name":1,"Name":2}}}',
      'arrays',
      undefined,
    ],
    [
      '{"params":{"arguments":{"a":{"\\ud800":"\\udfff\\u0000"},"b":1,"b":2}}}',
      'lone surrogate escapes',
      'duplicate_key',
    ],
    [
      '{"params":{"arguments":{"a":{"k":"v","k":"w"}}}}',
      'a duplicate below the checked levels',
      undefined,
    ],
    [
      '{"params":{"arguments":{"a":{"__proto__":{"Name":1}}}}}',
      'a prototype key below them',
      undefined,
    ],
    [
      '{"params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"a","name":"b"}},"_meta":1}}',
      'under _meta',
      'duplicate_key',
    ],
    [
      '{"id":"a\\"b\\\\","params":{"arguments":{"x":[1,{"y":"\\""}]}},"ID":1}',
      'after a crossed subtree',
      'case_variant_key',
    ],
    ['{"params":{"na\\u006de":"x","name":"y"}}', 'an escaped deciding key', 'duplicate_key'],
    ['{"params":{"\\u004eame":"x"}}', 'an escaped case variant', 'case_variant_key'],
    ['{"params":{"na\\"me":"x","name\\"":"y","name":"z"}}', 'quotes inside judged keys', undefined],
    ['{"params":{"Zürich":{"Name":[]},"東京":"\\u00e9"}}', 'non-ASCII', undefined],
  ])('reads %s as the strict scan does (%s)', (text, _what, expected) => {
    expect(parses(text)).toBe(true)
    expect(problem(text)).toBe(expected)
  })

  it.each([
    ['[[[]]]', undefined, 'too_deep'],
    ['[[[ \n ]]]', undefined, 'too_deep'],
    ['[[{}],{"k":[]}]', undefined, 'too_deep'],
    ['["[[[[[[[["]', undefined, undefined],
    ['[[[1]]]', 'too_deep', 'too_deep'],
    ['[[["s"]]]', 'too_deep', 'too_deep'],
    ['[[{"k":1}]]', 'too_deep', 'too_deep'],
    ['[[{"k":{}}]]', 'too_deep', 'too_deep'],
    ['[[[[]]]]', 'too_deep', 'too_deep'],
    ['[[[]],[[[]]]]', 'too_deep', 'too_deep'],
    ['[[[ true ]]]', 'too_deep', 'too_deep'],
  ])('bounds depth inside a crossed subtree exactly: arguments.a = %s', (a, at6, at5) => {
    // root 1, params 2, arguments 3, a 4: maxDepth 6 allows two more levels under `a`.
    const text = `{"params":{"arguments":{"a":${a}}},"id":1}`
    expect(problem(text, 6)).toBe(at6)
    expect(problem(text, 5)).toBe(at5)
  })

  it('bounds a deep crossed subtree without recursing', () => {
    const a = `${'['.repeat(100_000)}${']'.repeat(100_000)}`
    expect(problem(`{"params":{"arguments":{"a":${a}}}}`)).toBe('too_deep')
  })

  it('refuses an unterminated string or subtree, however deep', () => {
    for (const text of [
      '{"params":{"arguments":{"a":{"s":"abc}}}}',
      '{"params":{"arguments":{"a":{"s":"abc\\"}}}}',
      '{"params":{"arguments":{"a":"abc',
      '{"params":{"arguments":{"a":[[{"x":1}',
      '{"params":{"na',
    ]) {
      expect(kind(fast(text))).toBe('syntax')
      expect(problem(text)).toBe('syntax')
    }
  })

  // Leniency on invalid JSON is what makes the mode fast; JSON.parse refuses every one of these
  // afterwards (mcp/jsonrpc.ts), and the strict scan names the reason.
  it.each([
    ['{"params":{"arguments":{"a":{"s":"tab\there"}}}}', 'a control character in a crossed string'],
    ['{"params":{"arguments":{"a":{"s":"\\x"}}}}', 'a bad escape'],
    ['{"params":{"arguments":{"a":[1,,2}}}}', 'the wrong bracket, a missing value'],
    ['{"params":{"arguments":{"a":{"k" 1 2}}}}', 'a missing colon'],
    ['{"method":"a\u0001b"}', 'a control character in a judged value'],
  ])('may pass what JSON.parse refuses: %s (%s)', (text) => {
    expect(parses(text)).toBe(false)
    expect(problem(text)).toBe('syntax')
    expect(kind(fast(text))).toBeUndefined()
  })

  it('agrees with the strict scan on every body JSON.parse accepts (generated)', () => {
    const key = fc.constantFrom('a', 'name', 'Name', 'b', '__proto__', 'id', 'x\\"y', 'ſ', 'k\\\\')
    const leaf = fc.oneof(
      fc.constantFrom(
        '"\\""',
        '"\\\\"',
        '"}]"',
        '"[{"',
        '"\\u0022"',
        '"\\ud800"',
        '1e5',
        '-0',
        'null',
      ),
      fc.string({ maxLength: 6 }).map((s) => JSON.stringify(s)),
    )
    const { value } = fc.letrec<{ value: string }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.array(tie('value'), { maxLength: 3 }).map((vs) => `[${vs.join(',')}]`),
        fc
          .array(fc.tuple(key, tie('value')), { maxLength: 3 })
          .map((kvs) => `{${kvs.map(([k, v]) => `"${k}":${v}`).join(',')}}`),
      ),
    }))
    const body = fc
      .tuple(value, value, value, fc.constantFrom('"name"', '"Name"', '"b"', '"arguments"'))
      .map(
        ([a, b, meta, k]) =>
          `{"jsonrpc":"2.0","id":7,"params":{"arguments":{"a":${a},"b":${b}},${k}:1,"_meta":${meta}}}`,
      )
    // Insertions a crossing could misread: quotes, backslashes, brackets, a duplicate key.
    const mutated = fc
      .tuple(body, fc.nat(), fc.constantFrom('"', '\\', '{', '}', '[', ']', ',"b":1', ',"name":2'))
      .map(([t, at, ins]) => t.slice(0, at % t.length) + ins + t.slice(at % t.length))
    fc.assert(
      fc.property(fc.oneof(body, mutated), fc.integer({ min: 4, max: 12 }), (text, maxDepth) => {
        const strict = outcome(text, maxDepth, false)
        if (parses(text)) expect(outcome(text, maxDepth, true)).toEqual(strict)
        // The scanner accepts only what JSON.parse accepts.
        else expect(typeof strict).toBe('string')
      }),
      { numRuns: 3000, seed: 20261130 },
    )
  })
})

describe('scanJson allKeys (bodies whose arguments a condition judges)', () => {
  const kind = (text: string, fast: boolean): string => {
    try {
      scanJson(text, { maxDepth: 64, fast, allKeys: true })
      return 'ok'
    } catch (err) {
      if (err instanceof JsonScanError) return err.kind
      throw err
    }
  }
  const deep = (members: string) =>
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"q","arguments":{"opts":{"x":[{${members}}]}}}}`

  it.each([
    ['distinct keys', '"db":"a","dB2":"b","dbx":1', 'ok'],
    ['a duplicate at depth 6', '"db":"a","db":"b"', 'duplicate_key'],
    ['a case variant', '"db":"a","DB":"b"', 'case_variant_key'],
    ['the long s', '"ssl":1,"ſſl":2', 'case_variant_key'],
    ['the Kelvin sign', '"kind":1,"\\u212aind":2', 'case_variant_key'],
    ['a key cut at NUL', '"db":"a","db\\u0000x":"b"', 'case_variant_key'],
    // Go folds every letter, not only ASCII (unicode.ToUpper(unicode.ToLower(r))).
    ['a non-ASCII case variant', '"città":1,"CITTÀ":2', 'case_variant_key'],
    ['the Greek sigmas', '"σ":1,"ς":2', 'case_variant_key'],
    ['ß and ẞ', '"groß":1,"groẞ":2', 'case_variant_key'],
    ['ß and ss (no full folding)', '"groß":1,"gross":2', 'ok'],
  ])('%s deep in the arguments: %s', (_, members, expected) => {
    for (const fast of [false, true]) expect(kind(deep(members), fast)).toBe(expected)
    // Without allKeys, keys this deep are the tool's business (checked to KEY_CHECK_DEPTH only).
    expect(typeof outcome(deep(members), 64, true)).toBe('object')
  })
})
