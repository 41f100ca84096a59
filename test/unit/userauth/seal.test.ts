import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  checkRequestState,
  openLink,
  sealLink,
  sealRequestState,
} from '../../../src/userauth/links.js'
import {
  openRecord,
  recordName,
  sealRecord,
  type TokenRecord,
} from '../../../src/userauth/records.js'
import { deriveKeys, open, seal } from '../../../src/userauth/seal.js'

const KEYS = deriveKeys(randomBytes(32).toString('base64'))
const OTHER = deriveKeys(randomBytes(32).toString('base64'))
const ISS = 'https://idp.example.com'
const NOW = 1_800_000_000_000

describe('userauth sealing (AES-256-GCM, docs/security.md §Per-user tokens)', () => {
  it('opens only with the same key and associated data, and never throws on junk', () => {
    const sealed = seal(KEYS.tokens, 'a', 'secret')
    expect(open(KEYS.tokens, 'a', sealed)).toBe('secret')
    expect(open(KEYS.tokens, 'b', sealed)).toBeUndefined()
    expect(open(OTHER.tokens, 'a', sealed)).toBeUndefined()
    expect(open(KEYS.links, 'a', sealed)).toBeUndefined() // another derived key
    // One character changed inside the sealed text (not the last, whose low bits may be padding).
    const tampered = sealed.slice(0, 5) + (sealed[5] === 'A' ? 'B' : 'A') + sealed.slice(6)
    expect(tampered).not.toBe(sealed)
    expect(open(KEYS.tokens, 'a', tampered)).toBeUndefined()
    for (const junk of ['', 'x', '!!!!', 'a'.repeat(40), `${sealed}=`])
      expect(open(KEYS.tokens, 'a', junk)).toBeUndefined()
  })

  it('a record opens under its own name only, which names no user', () => {
    const record: TokenRecord = {
      iss: ISS,
      sub: 'alice',
      server: 'tracker',
      // Values long enough that random base64url cannot contain them by chance.
      access: 'access-token-of-alice',
      refresh: 'refresh-token-of-alice',
      connectedAt: NOW,
    }
    const name = recordName(KEYS, 'tracker', ISS, 'alice')
    expect(name.startsWith('t:tracker:')).toBe(true)
    expect(name).not.toContain('alice')
    const sealed = sealRecord(KEYS, name, record)
    for (const plain of ['access-token-of-alice', 'refresh-token-of-alice', 'alice', 'tracker'])
      expect(sealed).not.toContain(plain)
    expect(openRecord(KEYS, name, sealed)).toEqual(record)
    // Copied to bob's name, or read with a rotated key: no record.
    expect(openRecord(KEYS, recordName(KEYS, 'tracker', ISS, 'bob'), sealed)).toBeUndefined()
    expect(openRecord(OTHER, name, sealed)).toBeUndefined()
    // `a`+`bc` and `ab`+`c` are different users.
    expect(recordName(KEYS, 's', 'a', 'bc')).not.toBe(recordName(KEYS, 's', 'ab', 'c'))
  })

  it('a connect link is for one server, ten minutes', () => {
    const { sealed, state } = sealLink(KEYS, ISS, 'alice', 'tracker', NOW)
    expect(openLink(KEYS, sealed, 'tracker', NOW + 1000)).toEqual(state)
    expect(openLink(KEYS, sealed, 'other', NOW)).toBe('invalid')
    expect(openLink(KEYS, sealed, 'tracker', NOW + 10 * 60_000)).toBe('expired')
    expect(openLink(OTHER, sealed, 'tracker', NOW)).toBe('invalid')
    expect(sealed).not.toContain('alice')
  })

  it('a requestState is this caller’s, server’s and method’s only', () => {
    const state = sealRequestState(KEYS, ISS, 'alice', 'tracker', 'tools/call', NOW)
    const check = (sub: string, server: string, method: string, at = NOW) =>
      checkRequestState(KEYS, state, ISS, sub, server, method, at)
    expect(check('alice', 'tracker', 'tools/call')).toBe(true)
    expect(check('bob', 'tracker', 'tools/call')).toBe(false)
    expect(check('alice', 'other', 'tools/call')).toBe(false)
    expect(check('alice', 'tracker', 'prompts/get')).toBe(false)
    expect(check('alice', 'tracker', 'tools/call', NOW + 10 * 60_000)).toBe(false)
    expect(checkRequestState(KEYS, 'mcp-edge.ua1.junk', ISS, 'alice', 'tracker', 'x', NOW)).toBe(
      false,
    )
  })
})
