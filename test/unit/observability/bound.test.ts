import { describe, expect, it } from 'vitest'
import { MAX_EXPORTED_CHARS, bounded } from '../../../src/observability/bound.js'

describe('bounded', () => {
  it('keeps a value that fits as it is', () => {
    const fits = 'a'.repeat(MAX_EXPORTED_CHARS)
    expect(bounded(fits)).toBe(fits)
    expect(bounded('')).toBe('')
  })

  it('cuts a longer value to the bound, ending in …', () => {
    const cut = bounded('é'.repeat(200_000))
    expect(cut).toHaveLength(MAX_EXPORTED_CHARS)
    expect(cut).toBe(`${'é'.repeat(MAX_EXPORTED_CHARS - 1)}…`)
  })

  it('never splits a surrogate pair', () => {
    // The pair would straddle the cut: it goes whole, and the value is one shorter.
    const value = `${'a'.repeat(MAX_EXPORTED_CHARS - 2)}😀${'b'.repeat(100)}`
    const cut = bounded(value)
    expect(cut).toBe(`${'a'.repeat(MAX_EXPORTED_CHARS - 2)}…`)
    expect(cut).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/)
  })
})
