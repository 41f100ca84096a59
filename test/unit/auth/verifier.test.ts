import { describe, expect, it, onTestFinished } from 'vitest'
import { createKeySource, type KeySource } from '../../../src/auth/key-source.js'
import { createVerifier } from '../../../src/auth/verifier.js'
import { configSchema } from '../../../src/config/schema.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  startJwks,
  type TestKey,
} from '../../helpers/tokens.js'

const ISS = 'https://idp.example.test'
const AUD = 'https://mcp.example.test/mcp/app'
const MAX_AGE = 1000

/**
 * A verifier over a real remote JWK Set (a local server) with a hand-moved clock. `checks` counts
 * signature checks, i.e. key lookups by jose; a remembered token costs none.
 */
async function setup(keys: TestKey[], verifiedCacheMs = 60_000) {
  const jwks = await startJwks(keys)
  onTestFinished(() => jwks.close())
  let t = Date.now()
  const now = (): number => t
  const auth = configSchema.parse({
    servers: { app: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } },
    auth: {
      publicUrl: 'https://mcp.example.test',
      jwt: {
        issuer: ISS,
        jwksUrl: jwks.url,
        verifiedCacheMs,
        jwksCacheMaxAgeMs: MAX_AGE,
        jwksCooldownMs: 0,
      },
    },
  }).auth
  if (auth?.jwt === undefined) throw new Error('no auth')
  const real = createKeySource(auth.jwt, '.', { now })
  let checks = 0
  const resolve = real.key as Extract<KeySource['key'], (...a: never[]) => unknown>
  const counted: KeySource = {
    ...real,
    key: (header, token) => {
      checks++
      return resolve(header, token)
    },
    warm: () => real.warm(),
    retryAfterSec: () => real.retryAfterSec(),
    stillServes: (id) => real.stillServes(id),
  }
  const verifier = createVerifier(auth, '.', { maxTokenBytes: 8192, keys: counted, now })
  return {
    jwks,
    verifier,
    checks: () => checks,
    advance: (ms: number) => void (t += ms),
    mint: (key: TestKey, ttlSec = 300) => mintToken(claimsFor(ISS, AUD, {}, ttlSec), { key }),
  }
}

describe('verified-token cache', () => {
  it('checks a token once and remembers the caller for later requests', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { verifier, checks, mint } = await setup([key])
    const token = await mint(key)
    const a = await verifier.verify(token, AUD)
    const b = await verifier.verify(token, AUD)
    expect(b).toBe(a)
    expect(checks()).toBe(1)
  })

  it('answers a remembered token at once, and refuses an oversized one as a rejection', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { verifier, mint } = await setup([key])
    const token = await mint(key)
    const first = verifier.verify(token, AUD)
    expect(first).toBeInstanceOf(Promise)
    const principal = await first
    // The authenticate stage then decides without a promise (pipeline/authenticate.ts).
    expect(verifier.verify(token, AUD)).toBe(principal)
    // Another audience is never the remembered one: checked again, as a promise.
    const other = verifier.verify(token, 'https://mcp.example.test/mcp/other')
    expect(other).toBeInstanceOf(Promise)
    await expect(other).rejects.toThrow()
    const huge = verifier.verify(`${token}${'a'.repeat(9000)}`, AUD)
    expect(huge).toBeInstanceOf(Promise)
    await expect(huge).rejects.toMatchObject({ kind: 'invalid_token', reason: 'token too large' })
  })

  it('never lets a remembered check stand for another audience', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { verifier, mint } = await setup([key])
    const token = await mint(key)
    await verifier.verify(token, AUD)
    await expect(
      verifier.verify(token, 'https://mcp.example.test/mcp/other'),
    ).rejects.toMatchObject({ kind: 'invalid_token', reason: 'wrong aud' })
  })

  it('forgets a token whose key was replaced under the same kid, and refuses it on the recheck', async () => {
    const [before, after] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k1'),
    ])
    const { jwks, verifier, checks, advance, mint } = await setup([before])
    const old = await mint(before)
    await verifier.verify(old, AUD)
    jwks.setKeys([after]) // the IdP rotated the key and kept the kid
    advance(MAX_AGE + 1) // the set is refetched on the next lookup
    const fresh = await mint(after)
    await verifier.verify(fresh, AUD)
    expect(jwks.hits).toBe(2)
    // The remembered check of `old` named kid k1, which is still served; its key is not.
    await expect(verifier.verify(old, AUD)).rejects.toMatchObject({
      kind: 'invalid_token',
      reason: 'bad signature',
    })
    expect(checks()).toBe(3)
    await expect(verifier.verify(old, AUD)).rejects.toMatchObject({ kind: 'invalid_token' })
  })

  it('keeps remembering a token whose signing key is still served after a refetch', async () => {
    const [k1, k2, k3] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k2'),
      generateTestKey('ES256', 'k3'),
    ])
    const { jwks, verifier, checks, advance, mint } = await setup([k1, k2])
    const kept = await mint(k2)
    const dropped = await mint(k1)
    const principal = await verifier.verify(kept, AUD)
    await verifier.verify(dropped, AUD)
    jwks.setKeys([k2, k3])
    advance(MAX_AGE + 1)
    await verifier.verify(await mint(k3), AUD) // refetches: k1 is gone, k2 stays
    expect(jwks.hits).toBe(2)
    const before = checks()
    expect(await verifier.verify(kept, AUD)).toBe(principal)
    expect(checks()).toBe(before)
    await expect(verifier.verify(dropped, AUD)).rejects.toMatchObject({
      kind: 'invalid_token',
      reason: 'unknown signing key',
    })
  })

  it('checks again once the key set is older than its max age, before any refetch', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { jwks, verifier, checks, advance, mint } = await setup([key])
    const token = await mint(key)
    await verifier.verify(token, AUD)
    advance(MAX_AGE + 1)
    await verifier.verify(token, AUD)
    expect(checks()).toBe(2)
    expect(jwks.hits).toBe(2)
  })

  it('never remembers a token past its exp, and the recheck uses the same clock', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { verifier, checks, advance, mint } = await setup([key])
    const token = await mint(key, 1)
    await verifier.verify(token, AUD)
    advance(1100)
    // Past exp the entry is gone; the real check runs and its 30 s clock tolerance still holds.
    await verifier.verify(token, AUD)
    expect(checks()).toBe(2)
    advance(31_000)
    await expect(verifier.verify(token, AUD)).rejects.toMatchObject({ reason: 'token expired' })
  })

  it('remembers for verifiedCacheMs at most', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { verifier, checks, advance, mint } = await setup([key], 500)
    const token = await mint(key)
    await verifier.verify(token, AUD)
    advance(499)
    await verifier.verify(token, AUD)
    expect(checks()).toBe(1)
    advance(2)
    await verifier.verify(token, AUD)
    expect(checks()).toBe(2)
  })

  it('verifies every request when verifiedCacheMs is 0', async () => {
    const key = await generateTestKey('ES256', 'k1')
    const { verifier, checks, mint } = await setup([key], 0)
    const token = await mint(key)
    await verifier.verify(token, AUD)
    await verifier.verify(token, AUD)
    expect(checks()).toBe(2)
  })
})
