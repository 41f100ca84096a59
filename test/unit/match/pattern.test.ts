import { describe, expect, it } from 'vitest'
import { compilePattern, compilePatterns } from '../../../src/match/pattern.js'

describe('policy patterns', () => {
  it.each([
    // pattern, value, matches
    ['search', 'search', true],
    ['search', 'Search', false],
    ['search', 'SEARCH', false],
    ['search', 'search ', false],
    ['search', ' search', false],
    ['search', 'ｓearch', false], // fullwidth s (U+FF53): no Unicode normalisation
    ['search', 'search\u200b', false], // zero-width space
    ['search', 'searc', false],
    ['café', 'café', true],
    ['café', 'cafe\u0301', false], // NFC vs NFD: byte for byte, no normalisation
    ['get_*', 'get_forecast', true],
    ['get_*', 'get_', true],
    ['get_*', 'Get_forecast', false],
    ['get_*', 'xget_forecast', false],
    ['*_forecast', 'slow_forecast', true],
    ['*_forecast', 'slow_forecast2', false],
    ['get_*_v2', 'get_forecast_v2', true],
    ['get_*_v2', 'get__v2', true],
    ['get_*_v2', 'get_v2', false], // head and tail may not overlap
    ['a*b*c', 'abc', true],
    ['a*b*c', 'aXbYc', true],
    ['a*b*c', 'acb', false],
    ['a*a', 'a', false],
    ['a*a', 'aa', true],
    ['*', '', true],
    ['*', 'anything at all', true],
    ['**', 'x', true],
    ['docs://*', 'docs://readme', true],
    ['docs://*', 'docs://pages/{name}', true],
    ['docs://*', 'DOCS://readme', false],
    ['docs://pages/*', 'docs://readme', false],
    // regex metacharacters are plain characters
    ['a.c', 'abc', false],
    ['a.c', 'a.c', true],
    ['(x)+', '(x)+', true],
    ['(x)+', 'xx', false],
    ['[ab]', 'a', false],
    ['a?c', 'abc', false],
    ['^a$', '^a$', true],
    ['a\\*b', 'a\\Xb', true], // no escaping: backslash is literal, * is still a wildcard
  ])('%j against %j → %s', (pattern, value, expected) => {
    expect(compilePattern(pattern)(value)).toBe(expected)
    expect(compilePatterns([pattern])(value)).toBe(expected)
  })

  it('matches a list when any pattern matches, and nothing when the list is empty', () => {
    const m = compilePatterns(['search', 'get_*'])
    expect(m('search')).toBe(true)
    expect(m('get_alerts')).toBe(true)
    expect(m('delete_repo')).toBe(false)
    expect(compilePatterns([])('x')).toBe(false)
    expect(compilePatterns(undefined)('x')).toBe(false)
  })

  it('scans in linear time (no backtracking blow-up)', () => {
    const m = compilePattern('*a*a*a*a*a*a*a*a*a*a*b')
    const value = 'a'.repeat(100_000)
    const start = performance.now()
    expect(m(value)).toBe(false)
    expect(performance.now() - start).toBeLessThan(2000) // generous; a backtracking regex takes ages
  })
})
