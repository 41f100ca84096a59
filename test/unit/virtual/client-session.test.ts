import { describe, expect, it } from 'vitest'
import { VirtualSessionCodec } from '../../../src/virtual/client-session.js'

const KEY = Buffer.from('a-test-key-of-at-least-16-chars')
const ALICE = { issuer: 'https://idp', subject: 'alice' }
const PARAMS = {
  protocolVersion: '2025-11-25',
  capabilities: { elicitation: {} },
  clientInfo: { name: 'inspector', version: '1.2.3' },
}

describe('VirtualSessionCodec', () => {
  it('opens on another codec with the same key (another gateway replica)', () => {
    const { token, session } = new VirtualSessionCodec(KEY, 'workspace').issue(
      '2025-11-25',
      PARAMS,
      ALICE,
    )
    const opened = new VirtualSessionCodec(KEY, 'workspace').open(token, ALICE)
    expect(opened).toEqual(session)
    expect(opened).toEqual({
      id: expect.any(String),
      version: '2025-11-25',
      capabilities: { elicitation: {} },
      clientInfo: { name: 'inspector', version: '1.2.3' },
    })
    expect(token).not.toContain('inspector')
  })

  it('refuses another principal, another virtual server, another key and any change', () => {
    const codec = new VirtualSessionCodec(KEY, 'workspace')
    const { token } = codec.issue('2025-11-25', PARAMS, ALICE)
    expect(codec.open(token, { ...ALICE, subject: 'bob' })).toBeUndefined()
    expect(codec.open(token, undefined)).toBeUndefined()
    expect(new VirtualSessionCodec(KEY, 'other').open(token, ALICE)).toBeUndefined()
    expect(
      new VirtualSessionCodec(Buffer.from('another-key-of-16-chars!'), 'workspace').open(
        token,
        ALICE,
      ),
    ).toBeUndefined()
    const flipped = `${token.slice(0, 20)}${token[20] === 'A' ? 'B' : 'A'}${token.slice(21)}`
    expect(codec.open(flipped, ALICE)).toBeUndefined()
    expect(codec.open('x'.repeat(5000), ALICE)).toBeUndefined()
    expect(codec.open('not base64!', ALICE)).toBeUndefined()
  })

  it('issues a new id per session and drops oversized capabilities', () => {
    const codec = new VirtualSessionCodec(KEY, 'workspace')
    const a = codec.issue('2025-11-25', PARAMS, undefined)
    const b = codec.issue('2025-11-25', PARAMS, undefined)
    expect(a.session.id).not.toBe(b.session.id)
    const big = codec.issue('2025-06-18', { capabilities: { x: 'y'.repeat(4000) } }, undefined)
    expect(codec.open(big.token, undefined)).toMatchObject({
      version: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'unknown', version: 'unknown' },
    })
  })
})
