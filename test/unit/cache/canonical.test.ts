import { describe, expect, it } from 'vitest'
import { keyParamsOf } from '../../../src/cache/canonical.js'

const CAPS = 'io.modelcontextprotocol/clientCapabilities'
/** The params key text of a request body whose params are `params` (raw JSON text). */
const of = (params: string): string =>
  keyParamsOf(`{"jsonrpc":"2.0","id":1,"params":${params}}`).params

describe('keyParamsOf', () => {
  it('keeps numbers exactly as written, big integers included', () => {
    expect(of('{"page":9007199254740993}')).toBe('{"page":9007199254740993}')
    expect(of('{"a":[1.0,-0,1e400,12345678901234567890]}')).toBe(
      '{"a":[1.0,-0,1e400,12345678901234567890]}',
    )
  })

  it('keeps members named __proto__, constructor and prototype, and deep duplicates in order', () => {
    expect(of('{"f":{"__proto__":{"x":1},"constructor":2,"prototype":3}}')).toBe(
      '{"f":{"__proto__":{"x":1},"constructor":2,"prototype":3}}',
    )
    expect(of('{"f":{"g":{"a":1,"a":2}}}')).toBe('{"f":{"g":{"a":1,"a":2}}}')
    expect(of('{"b":1,"a":2}')).toBe('{"b":1,"a":2}')
  })

  it('reads strings by their value: escapes and whitespace do not matter', () => {
    expect(of(' { "c" : "\\u0061\\/\\u00e9" , "d" : [ true , null ] } ')).toBe(
      '{"c":"a/é","d":[true,null]}',
    )
    expect(of('{"\\u0063":"\\"\\n"}')).toBe('{"c":"\\"\\n"}')
    // lone surrogates stay distinct (they are escaped the same way JSON.stringify does)
    expect(of('{"c":"\\ud800"}')).not.toBe(of('{"c":"\\udbff"}'))
  })

  it('sets _meta apart: only the client capabilities count, case variants included', () => {
    const body = (meta: string) => `{"id":1,"params":{"cursor":"x","_meta":${meta}},"method":"m"}`
    const plain = keyParamsOf(body(`{"traceparent":"t","${CAPS}":{"roots":{}},"progressToken":1}`))
    expect(plain).toEqual({ params: '{"cursor":"x"}', capabilities: `"${CAPS}":{"roots":{}}` })
    const variant = keyParamsOf(body(`{"${CAPS}":{},"${CAPS.toUpperCase()}":{"x":1}}`))
    expect(variant.capabilities).toBe(`"${CAPS}":{},"${CAPS.toUpperCase()}":{"x":1}`)
    expect(keyParamsOf(body('{}'))).toEqual({ params: '{"cursor":"x"}', capabilities: '' })
  })

  it('tells no params from empty params, and a non-object _meta is an ordinary member', () => {
    expect(keyParamsOf('{"jsonrpc":"2.0","id":1,"method":"m"}')).toEqual({
      params: '',
      capabilities: '',
    })
    expect(of('{}')).toBe('{}')
    expect(of('{"_meta":{}}')).toBe('{}')
    expect(of('{"_meta":5}')).toBe('{"_meta":5}')
  })

  it('finds params after members of any shape, and after a BOM', () => {
    const body = '\ufeff{"x":{"params":{"no":1}},"y":["}",{"]":"\\""}],"params":{"a":1}}'
    expect(keyParamsOf(body).params).toBe('{"a":1}')
  })

  it('throws on text the strict scanner would have refused', () => {
    for (const bad of ['', '[]', '{"params":{"a":}}', '{"params":{"a":"x}}', '{"params":{"a":1']) {
      expect(() => keyParamsOf(bad)).toThrow()
    }
  })
})
