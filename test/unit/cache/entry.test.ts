import { describe, expect, it } from 'vitest'
import { createEntry, hitParts, remainingTtl, type CacheEntry } from '../../../src/cache/entry.js'

const serverInfo = { 'io.modelcontextprotocol/serverInfo': { name: 'srv', version: '1' } }
const result = {
  tools: [{ name: 'a', description: 'ü "quoted"' }],
  resultType: 'complete',
  ttlMs: 60_000,
  cacheScope: 'public',
  _meta: serverInfo,
}
const origin = {
  key: 'app~x:tools/list:-:k',
  server: 'app~x',
  method: 'tools/list',
  uri: undefined,
  storedAt: 1000,
}
const entry = createEntry(
  { jsonrpc: '2.0', id: 7, result },
  { scope: 'public', ttlMs: 60_000, lifeMs: 60_000 },
  origin,
)

/** The hit's pieces as the client receives them, in one buffer. */
function renderHit(entry: CacheEntry, rawId: string, now: number): Buffer {
  const p = hitParts(entry, rawId, now)
  return Buffer.concat([p.head, p.body, p.tail], p.length)
}

describe('hitParts', () => {
  it.each([
    ['a big integer id', '12345678901234567890'],
    ['an escaped string id', '"a\\u0041\\"b\\\\c\\n"'],
    ['a negative fractional id', '-1.5e3'],
    ['a plain string id', '"req-1"'],
  ])('splices %s byte for byte', (_name, rawId) => {
    const text = renderHit(entry, rawId, 1000).toString('utf8')
    expect(text.startsWith(`{"jsonrpc":"2.0","id":${rawId},"result":{`)).toBe(true)
    const parsed = JSON.parse(text) as { id: unknown; result: Record<string, unknown> }
    expect(parsed.id).toEqual(JSON.parse(rawId))
  })

  it('keeps the upstream result exactly, _meta included, with ttlMs reduced by age', () => {
    const parsed = JSON.parse(renderHit(entry, '1', 1000 + 15_250).toString('utf8')) as {
      result: unknown
    }
    expect(parsed.result).toEqual({ ...result, ttlMs: 44_750 })
    expect(remainingTtl(entry, 1000 + 90_000)).toBe(0)
  })
})
