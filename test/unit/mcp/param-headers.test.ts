import { describe, expect, it } from 'vitest'
import { paramDeclarations, paramHeaders } from '../../../src/mcp/param-headers.js'

const str = (header: unknown, type: unknown = 'string') => ({ type, 'x-mcp-header': header })
const schema = (properties: Record<string, unknown>) => ({ type: 'object', properties })

describe('paramDeclarations: the x-mcp-header declarations of an inputSchema (SEP-2243)', () => {
  it.each([
    [
      'a string, integer and boolean property',
      schema({ a: str('A'), b: str('B', 'integer'), c: str('C', 'boolean') }),
      [
        { path: ['a'], header: 'A' },
        { path: ['b'], header: 'B' },
        { path: ['c'], header: 'C' },
      ],
    ],
    [
      'a property nested through properties',
      schema({ site: schema({ code: str('Site-Code') }) }),
      [{ path: ['site', 'code'], header: 'Site-Code' }],
    ],
    ['the declared case', schema({ r: str('rEgIoN') }), [{ path: ['r'], header: 'rEgIoN' }]],
  ])('keeps %s', (_, input, expected) => {
    expect(paramDeclarations(input)).toEqual(expected)
  })

  it.each([
    [
      'a name that is no header token',
      schema({ a: str('Re gion'), b: str('X\r\nInjected: 1'), c: str('') }),
    ],
    ['a name that is no string', schema({ a: str(7), b: str(['A']) })],
    [
      'a number, object, array or untyped property',
      schema({
        a: str('A', 'number'),
        b: str('B', 'object'),
        c: { 'x-mcp-header': 'C' },
        d: str('D', ['string']),
      }),
    ],
    ['two names equal but for case (both)', schema({ a: str('Region'), b: str('region') })],
    ['a declaration on the schema itself', { type: 'string', 'x-mcp-header': 'Root' }],
    [
      'declarations not reachable through properties',
      {
        type: 'object',
        items: str('I'),
        anyOf: [schema({ a: str('A') })],
        additionalProperties: str('P'),
        $defs: { d: str('D') },
      },
    ],
    ['no schema', undefined],
    ['properties that are no object', { type: 'object', properties: [str('A')] }],
  ])('leaves out %s', (_, input) => {
    expect(paramDeclarations(input)).toEqual([])
  })

  it('follows at most 8 levels of properties and keeps at most 32 declarations', () => {
    let deep: Record<string, unknown> = str('Deep')
    for (let i = 0; i < 9; i++) deep = schema({ p: deep })
    expect(paramDeclarations(deep)).toEqual([])
    let eight: Record<string, unknown> = str('Eight')
    for (let i = 0; i < 8; i++) eight = schema({ p: eight })
    expect(paramDeclarations(eight)).toHaveLength(1)
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, str(`P${i}`)]))
    expect(paramDeclarations(schema(many))).toHaveLength(32)
  })
})

describe('paramHeaders: one call’s Mcp-Param-* headers', () => {
  it('writes each value as a 2026-07-28 client does, in declaration order', () => {
    const decl = paramDeclarations(
      schema({ r: str('Region'), n: str('N', 'integer'), b: str('B', 'boolean') }),
    )
    expect(paramHeaders(decl, { b: false, n: 0, r: '=?base64?x?=' })).toEqual([
      'Mcp-Param-Region',
      '=?base64?PT9iYXNlNjQ/eD89?=',
      'Mcp-Param-N',
      '0',
      'Mcp-Param-B',
      'false',
    ])
    expect(paramHeaders(decl, { r: '', n: -0 })).toEqual([
      'Mcp-Param-Region',
      '=?base64??=',
      'Mcp-Param-N',
      '0',
    ])
  })
})
