import { describe, expect, it } from 'vitest'
import { createEntry, parseResult, type CacheEntry } from '../../../src/cache/entry.js'
import {
  decodeShared,
  encodeEntry,
  type SharedExpectation,
} from '../../../src/cache/shared-entry.js'

const result = {
  tools: [{ name: 'a', description: 'ü "quoted"' }],
  resultType: 'complete',
  ttlMs: 60_000,
  cacheScope: 'public',
  _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'srv', version: '1' } },
}
const entry = createEntry(
  { jsonrpc: '2.0', id: 7, result },
  { scope: 'public', ttlMs: 60_000, lifeMs: 60_000 },
  {
    key: 'app~x:tools/list:-:k',
    server: 'app~x',
    method: 'tools/list',
    uri: undefined,
    storedAt: 1000,
  },
)
const want: SharedExpectation = {
  key: entry.key,
  scope: 'public',
  server: 'app~x',
  method: 'tools/list',
  uri: undefined,
  maxTtlMs: 300_000,
}

/** A value with `head` merged over the real header and `body` as the result bytes. */
function value(head: Record<string, unknown> = {}, body?: string): Buffer {
  const real = encodeEntry(entry, 60_000)
  const nl = real.indexOf(0x0a)
  const h = JSON.parse(real.subarray(0, nl).toString()) as Record<string, unknown>
  const bytes = body === undefined ? real.subarray(nl + 1) : Buffer.from(body)
  return Buffer.concat([
    Buffer.from(`${JSON.stringify({ ...h, bytes: bytes.length, ...head })}\n`),
    bytes,
  ])
}

function rejected(v: Buffer, w: SharedExpectation = want, pttl = 45_000): string {
  const read = decodeShared(v, w, pttl, 0)
  return 'rejected' in read ? read.rejected : 'accepted'
}

describe('decodeShared', () => {
  it('round-trips an entry and ages it by the remaining PTTL', () => {
    const read = decodeShared(encodeEntry(entry, 60_000), want, 45_000, 5_000_000)
    if (!('entry' in read)) throw new Error(read.rejected)
    const back: CacheEntry = read.entry
    expect(back).toMatchObject({ key: entry.key, server: 'app~x', scope: 'public', ttlMs: 60_000 })
    expect(back.storedAt).toBe(5_000_000 - 15_000)
    expect(back.result.equals(entry.result)).toBe(true)
    expect(parseResult(back)).toEqual(result)
  })

  it('caps the lifetime by this gateway’s maxTtlMs', () => {
    const read = decodeShared(encodeEntry(entry, 60_000), { ...want, maxTtlMs: 10_000 }, 1, 0)
    expect('entry' in read && read.entry.lifeMs).toBe(10_000)
  })

  it('refuses values written for another key, server, method, resource or scope', () => {
    expect(rejected(value(), { ...want, key: 'app~x:tools/list:-:other' })).toBe(
      'written for another key',
    )
    expect(rejected(value({ server: 'b~y' }))).toMatch(/another server/)
    expect(rejected(value({ method: 'prompts/list' }))).toMatch(/another server or method/)
    expect(rejected(value({ uri: 'docs://a' }))).toMatch(/another resource/)
    expect(rejected(value({ scope: 'private' }))).toMatch(/scope private/)
    expect(rejected(value(), { ...want, scope: 'private' })).toMatch(/scope public/)
  })

  it('refuses malformed headers and lifetimes', () => {
    expect(rejected(Buffer.from('garbage'))).toBe('no header line')
    expect(rejected(Buffer.from('{"v":1\n{}'))).toBe('header is not JSON')
    expect(rejected(value({ v: 2 }))).toBe('unknown header version')
    expect(rejected(value({ lifeMs: 0 }))).toMatch(/positive integers/)
    expect(rejected(value({ ttlMs: 1.5 }))).toMatch(/positive integers/)
    expect(rejected(value({ lifeMs: 120_000 }))).toMatch(/longer than its ttlMs/)
    expect(rejected(value(), want, 0)).toBe('no remaining lifetime')
    const real = encodeEntry(entry, 60_000)
    expect(rejected(real.subarray(0, real.length - 1))).toMatch(/length/)
  })

  it.each([
    ['{}', /not complete/],
    ['[]', /not a JSON object/],
    ['{"tools":[]},{"resultType":"complete"}', /not UTF-8 JSON/],
    ['{"tools":[],"resultType":"complete","cacheScope":"public"},"id":"evil","x":{"a":1}', /JSON/],
    ['{"tools":[], "resultType":"complete","cacheScope":"public"}', /form the gateway writes/],
    ['{"tools":[],"resultType":"complete","cacheScope":"public","tools":[]}', /form/],
    ['{"tools":[],"resultType":"complete","cacheScope":"public","ttlMs":5}', /own ttlMs/],
    ['{"tools":[],"resultType":"input_required","cacheScope":"public"}', /not complete/],
    ['{"tools":[],"resultType":"complete","cacheScope":"private"}', /scope differs/],
    ['{"tools":{},"resultType":"complete","cacheScope":"public"}', /no tools array/],
  ])('refuses the result %s', (body, why) => {
    expect(rejected(value({}, body))).toMatch(why)
  })

  it('refuses invalid UTF-8 in the result', () => {
    const good = value({}, '{"tools":[],"resultType":"complete","cacheScope":"public","x":"?"}')
    good[good.length - 3] = 0xff // the `?` inside the string
    expect(rejected(good)).toMatch(/UTF-8/)
  })
})
