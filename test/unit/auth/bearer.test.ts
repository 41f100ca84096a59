import { describe, expect, it } from 'vitest'
import { hasQueryToken, readBearer } from '../../../src/auth/bearer.js'

describe('readBearer', () => {
  it.each([
    [undefined, { kind: 'none' }],
    ['Basic YWxpY2U6cHc=', { kind: 'none' }],
    ['Bearerxyz', { kind: 'none' }],
    ['Bearer', { kind: 'malformed', reason: 'malformed Authorization header' }],
    ['Bearer ', { kind: 'malformed', reason: 'malformed Authorization header' }],
    ['Bearer a b', { kind: 'malformed', reason: 'malformed Authorization header' }],
    ['Bearer a"b', { kind: 'malformed', reason: 'malformed Authorization header' }],
    ['Bearer abc.def-_~+/==', { kind: 'token', token: 'abc.def-_~+/==' }],
    ['bEaReR  abc ', { kind: 'token', token: 'abc' }],
  ] as const)('reads %j as %j', (header, expected) => {
    expect(readBearer(header, 100)).toEqual(expected)
  })

  it('refuses a token over the limit before looking at it', () => {
    expect(readBearer(`Bearer ${'a'.repeat(101)}`, 100)).toEqual({
      kind: 'malformed',
      reason: 'token too large',
    })
    expect(readBearer(`Bearer ${'a'.repeat(100)}`, 100)).toMatchObject({ kind: 'token' })
    expect(readBearer(`Bearer ${'!'.repeat(100_000)}`, 100)).toMatchObject({
      reason: 'token too large',
    })
  })
})

describe('hasQueryToken', () => {
  it.each([
    ['/mcp/w', false],
    ['/mcp/w?x=1', false],
    ['/mcp/w?access_token=abc', true],
    ['/mcp/w?x=1&access%5Ftoken=abc', true],
    ['/mcp/w?access_token', true],
  ])('%s → %s', (url, expected) => {
    expect(hasQueryToken(url)).toBe(expected)
  })
})
