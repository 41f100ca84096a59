import { describe, expect, it } from 'vitest'
import { bucketKey } from '../../../src/limits/key.js'

describe('bucketKey', () => {
  it('has one size whatever the value, and never contains the value', () => {
    const values = ['', '=a', `=${'k'.repeat(14 * 1024)}`, '=sk-live-0123456789', '-']
    const keys = values.map(bucketKey)
    for (const k of keys) expect(k).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(new Set(keys).size).toBe(values.length)
    expect(keys[3]).not.toContain('sk-live')
  })

  it('keeps values apart that UTF-8 would not (lone surrogates against U+FFFD)', () => {
    const lone = bucketKey('=\ud800')
    expect(lone).not.toBe(bucketKey('=\ufffd'))
    expect(lone).not.toBe(bucketKey('=\udc00'))
    expect(lone).toHaveLength(44)
    // A well-formed pair is hashed apart from its halves too.
    expect(bucketKey('=\ud83d\ude00')).not.toBe(bucketKey('=\ufffd\ufffd'))
  })
})
