import { describe, expect, it } from 'vitest'
import { SessionCodec, type HandleOwner } from '../../../src/upstream/sessions.js'
import type { Upstream } from '../../../src/upstream/upstream.js'

const KEY = Buffer.from('a-test-key-of-at-least-16-chars')
const replica = (url: string): Upstream => ({ url: new URL(url) }) as Upstream
const R0 = replica('http://10.0.0.1/mcp')
const R1 = replica('http://10.0.0.2/mcp')
const ALICE: HandleOwner = { issuer: 'https://idp.example.com', subject: 'alice' }
const SID = '4f1c2a9e-0000-4000-8000-0123456789ab'

const other: [string, HandleOwner | undefined][] = [
  ['another subject', { issuer: ALICE.issuer, subject: 'bob' }],
  ['another issuer', { issuer: 'https://evil.example.com', subject: 'alice' }],
  ['anonymous', undefined],
  ['a subject that differs only by case', { issuer: ALICE.issuer, subject: 'Alice' }],
  ['issuer/subject split differently', { issuer: `${ALICE.issuer}\u0000alice`, subject: '' }],
]

function codec(key = KEY, server = 'app'): SessionCodec {
  return new SessionCodec(key, server, [R0, R1])
}

/** Flips one bit of the sealed part's first byte (the token stays valid base64url). */
function flip(token: string, at: number): string {
  const c = token[at] as string
  return `${token.slice(0, at)}${c === 'A' ? 'B' : 'A'}${token.slice(at + 1)}`
}

describe('SessionCodec: session ids', () => {
  it('round-trips for the same principal, on any codec with the same key', () => {
    const id = codec().seal(R1, SID, ALICE) as string
    expect(codec().open(id, ALICE)).toEqual({ replica: R1, sessionId: SID })
    expect(codec().open(codec().seal(R0, SID, undefined) as string, undefined)).toEqual({
      replica: R0,
      sessionId: SID,
    })
  })

  it('is encrypted: the upstream id is not readable from it, and each seal differs', () => {
    const a = codec().seal(R0, SID, ALICE) as string
    const b = codec().seal(R0, SID, ALICE) as string
    expect(a).not.toBe(b) // random nonce
    const [tag, sealed] = a.split('.') as [string, string]
    expect(a.split('.')).toHaveLength(2)
    expect(tag).toMatch(/^[A-Za-z0-9_-]{12}$/)
    const bytes = Buffer.from(sealed, 'base64url')
    expect(bytes.includes(Buffer.from(SID))).toBe(false)
    expect(bytes.includes(Buffer.from('alice'))).toBe(false)
    expect(a.includes(Buffer.from(SID).toString('base64url').slice(0, 8))).toBe(false)
  })

  it.each(other)('does not open for %s', (_name, owner) => {
    expect(codec().open(codec().seal(R0, SID, ALICE) as string, owner)).toBeUndefined()
  })

  it('does not open an anonymous id for an authenticated principal', () => {
    expect(codec().open(codec().seal(R0, SID, undefined) as string, ALICE)).toBeUndefined()
  })

  it('refuses ids of another server, another key, tampered, malformed or oversized', () => {
    const good = codec().seal(R0, SID, ALICE) as string
    const [tag, sealed] = good.split('.') as [string, string]
    const otherTag = (codec().seal(R1, SID, ALICE) as string).split('.')[0] as string
    const bad = [
      codec(KEY, 'other').seal(R0, SID, ALICE) as string,
      codec(Buffer.from('another-key-of-16-chars-or-more')).seal(R0, SID, ALICE) as string,
      flip(good, tag.length + 1),
      flip(good, tag.length + 20),
      flip(good, good.length - 2),
      `${otherTag}.${sealed}`, // moved to another replica
      `${tag}.${sealed}.extra`,
      `${tag}${sealed}`,
      `${tag}.`,
      `.${sealed}`,
      `${tag}.${sealed.slice(0, 20)}`,
      `${tag}.${sealed}=`,
      `${tag}.${sealed.replace(/.$/, '+')}`,
      `${tag}.${'A'.repeat(2000)}`,
      '',
      'abc',
    ]
    for (const token of bad) expect(codec().open(token, ALICE), token).toBeUndefined()
    expect(codec().open(good, ALICE)).toBeDefined()
  })

  it('bounds lengths: backend ids over 512 characters are not sealed, sealed ids stay under 1 KiB', () => {
    expect(codec().seal(R0, 'x'.repeat(513), ALICE)).toBeUndefined()
    const longest = codec().seal(R0, 'x'.repeat(512), ALICE) as string
    expect(longest.length).toBeLessThanOrEqual(1024)
    expect(codec().open(longest, ALICE)?.sessionId).toBe('x'.repeat(512))
  })
})

describe('SessionCodec: task ids', () => {
  it('opens only for the principal and server it was sealed for, and hides the backend id', () => {
    const t = codec().sealTask('task-123', ALICE) as string
    expect(t).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(Buffer.from(t, 'base64url').includes(Buffer.from('task-123'))).toBe(false)
    expect(codec().openTask(t, ALICE)).toBe('task-123')
    for (const [, owner] of other) expect(codec().openTask(t, owner)).toBeUndefined()
    expect(codec(KEY, 'other').openTask(t, ALICE)).toBeUndefined()
    expect(codec().openTask(flip(t, 5), ALICE)).toBeUndefined()
    expect(codec().openTask('task-123', ALICE)).toBeUndefined()
  })

  it('keeps session ids and task ids apart (one does not open as the other)', () => {
    const session = codec().seal(R0, SID, ALICE) as string
    const task = codec().sealTask(SID, ALICE) as string
    expect(codec().openTask(session.split('.')[1] as string, ALICE)).toBeUndefined()
    expect(codec().open(`${session.split('.')[0]}.${task}`, ALICE)).toBeUndefined()
  })
})

describe('SessionCodec: stable task ids', () => {
  it('seals one task for one owner to one id, and differently for another owner or server', () => {
    const a = codec().sealTask('task-1', ALICE)
    expect(codec().sealTask('task-1', ALICE)).toBe(a)
    expect(codec().sealTask('task-2', ALICE)).not.toBe(a)
    expect(codec().sealTask('task-1', { ...ALICE, subject: 'bob' })).not.toBe(a)
    expect(codec(KEY, 'other').sealTask('task-1', ALICE)).not.toBe(a)
    expect(codec().sealTask('task-1', undefined)).not.toBe(a)
  })
})
