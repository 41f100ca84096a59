import { describe, expect, it } from 'vitest'
import { findTopLevelId } from '../../../src/mcp/raw-id.js'

describe('findTopLevelId', () => {
  it.each([
    ['{"jsonrpc":"2.0","id":12345678901234567890,"method":"x"}', '12345678901234567890'],
    ['{"id":"a\\"b","params":{"id":2}}', '"a\\"b"'],
    ['{"params":{"id":2},"id":-7}', '-7'],
    ['{"a":{"b":[1,{"c":"}"}]},"id":3,"a":1}', '3'], // duplicate keys elsewhere do not matter
    [`{"deep":${'['.repeat(100_000)}${']'.repeat(100_000)},"id":4}`, '4'], // no recursion
    ['{"id":5,"x":', '5'], // truncated after the id
  ])('finds the id in %#', (text, id) => {
    expect(findTopLevelId(text)).toBe(id)
  })

  it.each([
    ['{"id":1,"id":2}'], // two ids: neither can be trusted
    ['{"id":null}'],
    ['{"id":{"a":1}}'],
    ['{"id":true}'],
    ['[{"id":1}]'],
    ['"id"'],
    [''],
  ])('gives no id for %j', (text) => {
    expect(findTopLevelId(text)).toBeUndefined()
  })
})

describe('findTopLevelId only echoes valid ids', () => {
  it.each(['1.5', '1e2', '1E400', '-0', 'true', 'null', '{"a":1}', '[1]', '"a\u0001"'])(
    '%s is echoed as null',
    (id) => {
      expect(findTopLevelId(`{"id":${id},"method":"x"`)).toBeUndefined()
    },
  )

  it.each(['12345678901234567890123', '-3', '0', '"x\\u00e9"'])('%s is echoed as written', (id) => {
    expect(findTopLevelId(`{"id":${id},"method":"x"`)).toBe(id)
  })
})
