import { describe, expect, it } from 'vitest'
import { readerKey } from '../../../src/mcp/key-fold.js'

/** Every Unicode scalar value but NUL and the surrogates, as strings. */
function* scalars(): Generator<string> {
  for (let cp = 1; cp <= 0x10ffff; cp++)
    if (cp < 0xd800 || cp > 0xdfff) yield String.fromCodePoint(cp)
}

/** `b` equals `a` under the simple case folding of JavaScript's `u`+`i` regular expressions. */
function regexFolds(a: string, b: string): boolean {
  return new RegExp(`^${a.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')}$`, 'iu').test(b)
}

describe('readerKey', () => {
  it('is the key itself, the same string, for lower-case ASCII without NUL', () => {
    const key = 'max_results-2'
    expect(readerKey(key)).toBe(key)
    expect(readerKey('')).toBe('')
  })

  it.each([
    // Go's encoding/json: ASCII case, and the four letters that fold onto ASCII ones.
    ['Bcc', 'bcc'],
    ['BCC', 'bcc'],
    ['databa\u017fe', 'database'],
    ['\u212aind', 'kind'],
    ['\u0130d', 'id'],
    ['\u0131d', 'id'],
    // Other letters fold among themselves, as Go's unicode.ToUpper(unicode.ToLower(r)) does.
    ['CITT\u00c0', 'citt\u00e0'],
    ['GR\u00d6\u00dfE', 'gr\u00f6\u00dfe'],
    ['gr\u00f6\u1e9ee', 'gr\u00f6\u00dfe'],
    ['\u03a3\u03c2', '\u03c3\u03c3'],
    ['\u00b5', '\u03bc'],
    ['\u01c5', '\u01c4'],
    ['\u1f88', '\u1f80'],
    ['\u13a0', '\uab70'],
    ['\u{10400}', '\u{10428}'],
    // C readers stop at NUL, then the rest folds as above.
    ['bcc\u0000', 'bcc'],
    ['BCC\u0000x', 'bcc'],
    ['\u0000bcc', ''],
    // Go decodes a lone surrogate as U+FFFD.
    ['a\ud800', 'a\ufffd'],
    ['a\udfff', 'a\ufffd'],
  ])('reads %j as %j', (key, folded) => {
    expect(readerKey(key)).toBe(readerKey(folded))
  })

  it.each([
    ['bcc', 'bc'],
    ['ss', '\u00df'],
    ['gr\u00f6sse', 'gr\u00f6\u00dfe'],
    ['i', '\u0069\u0307'],
    ['\uff42cc', 'bcc'],
    ['b_cc', 'bcc'],
  ])('keeps %j and %j apart (no full folding, no width or punctuation folding)', (a, b) => {
    expect(readerKey(a)).not.toBe(readerKey(b))
  })

  it('keeps the UTF-16 length of every rune (the scanner compares lengths first)', () => {
    const longer: string[] = []
    for (const s of scalars()) if (readerKey(s).length !== s.length) longer.push(s)
    expect(longer).toEqual([])
  })

  it('folds at least as much as simple case folding, for every rune and its case mappings', () => {
    for (const s of scalars()) {
      const mapped = [s.toLowerCase(), s.toUpperCase(), s.toLowerCase().toUpperCase()]
      if (mapped.every((m) => m === s)) continue
      for (const m of mapped) {
        if ([...m].length !== 1 || !regexFolds(s, m)) continue
        expect(readerKey(m), `${s.codePointAt(0)?.toString(16)} ~ ${m}`).toBe(readerKey(s))
      }
    }
  })
})
