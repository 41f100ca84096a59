import { describe, expect, it } from 'vitest'
import { decodeHeaderValue } from '../../../src/mcp/headers.js'

const b64 = (s: string): string => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`

describe('decodeHeaderValue (SEP-2243 encoding)', () => {
  it.each([
    ['get_weather', 'get_weather'],
    ['file:///projects/myapp/config.json', 'file:///projects/myapp/config.json'],
    [b64('echo'), 'echo'],
    [b64('Zürich '), 'Zürich '],
    [b64('=?base64?x?='), '=?base64?x?='],
    [b64(''), ''],
  ])('decodes %j to %j', (raw, decoded) => {
    expect(decodeHeaderValue(raw)).toBe(decoded)
  })

  it.each([
    ['=?base64?not base64!?='],
    ['=?base64?ZWNobw?='], // missing padding
    [`=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=`], // not UTF-8
    [' leading'],
    ['trailing '],
    [''],
    ['caf\u00e9'], // raw non-ASCII must travel base64-encoded
    ['tab\tinside'],
  ])('rejects %j', (raw) => {
    expect(decodeHeaderValue(raw)).toBeUndefined()
  })

  it('keeps the markers case-sensitive: =?BASE64?…?= is a plain value', () => {
    expect(decodeHeaderValue('=?BASE64?ZWNobw==?=')).toBe('=?BASE64?ZWNobw==?=')
  })
})
