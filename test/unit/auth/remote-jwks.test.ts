import { calculateJwkThumbprint, errors, type FlattenedJWSInput } from 'jose'
import { describe, expect, it, onTestFinished } from 'vitest'
import { JwksUnavailable, RemoteJwks } from '../../../src/auth/remote-jwks.js'
import { generateTestKey, manualClock, startJwks, type TestKey } from '../../helpers/tokens.js'

/**
 * The remote key set keeps jose's createRemoteJWKSet semantics (docs/auth.md, Key fetching) on
 * an injected clock: cache age, unknown-kid cooldown, one shared fetch, and the failure backoff.
 */

const TOKEN: FlattenedJWSInput = { payload: '', signature: '' }
const header = (k: TestKey) => ({ alg: k.alg, kid: k.kid })

async function rig(keys: TestKey[], timing: { cooldownMs?: number; cacheMaxAgeMs?: number } = {}) {
  const jwks = await startJwks(keys)
  onTestFinished(() => jwks.close())
  const clock = manualClock()
  const remote = new RemoteJwks(new URL(jwks.url), {
    timeoutMs: 2000,
    cooldownMs: timing.cooldownMs ?? 30_000,
    cacheMaxAgeMs: timing.cacheMaxAgeMs ?? 600_000,
    now: clock.now,
  })
  return { jwks, clock, remote }
}

describe('remote JWK Set', () => {
  it('fetches on first use, then serves keys from memory until cacheMaxAge', async () => {
    const k1 = await generateTestKey('ES256', 'k1')
    const { jwks, clock, remote } = await rig([k1], { cacheMaxAgeMs: 1000 })
    expect(remote.fresh()).toBe(false)
    await remote.resolve(header(k1), TOKEN)
    await remote.resolve(header(k1), TOKEN)
    expect(jwks.hits).toBe(1)
    expect(remote.fresh()).toBe(true)
    clock.advance(999)
    await remote.resolve(header(k1), TOKEN)
    expect(jwks.hits).toBe(1)
    clock.advance(1)
    expect(remote.fresh()).toBe(false)
    await remote.resolve(header(k1), TOKEN)
    expect(jwks.hits).toBe(2)
  })

  it('shares one fetch between concurrent callers at cold start, failures included', async () => {
    const k1 = await generateTestKey('ES256', 'k1')
    const { jwks, clock, remote } = await rig([k1])
    jwks.setMode('error500')
    const failed = await Promise.allSettled(
      Array.from({ length: 10 }, () => remote.resolve(header(k1), TOKEN)),
    )
    expect(failed.every((r) => r.status === 'rejected')).toBe(true)
    expect(jwks.hits).toBe(1)
    jwks.setMode('ok')
    clock.advance(1000)
    const keys = await Promise.all(
      Array.from({ length: 10 }, () => remote.resolve(header(k1), TOKEN)),
    )
    expect(new Set(keys).size).toBe(1)
    expect(jwks.hits).toBe(2)
  })

  it('refetches for an unknown kid once per cooldown; concurrent misses share one fetch', async () => {
    const [k1, k2] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k2'),
    ])
    const { jwks, clock, remote } = await rig([k1], { cooldownMs: 5000 })
    await remote.resolve(header(k1), TOKEN)
    // Within the cooldown an unknown kid is refused without asking the endpoint.
    await expect(remote.resolve(header(k2), TOKEN)).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey)
    expect(jwks.hits).toBe(1)
    clock.advance(5000)
    const misses = await Promise.allSettled(
      Array.from({ length: 20 }, () => remote.resolve(header(k2), TOKEN)),
    )
    expect(misses.every((m) => m.status === 'rejected')).toBe(true)
    expect(jwks.hits).toBe(2)
    // The refetch restarted the cooldown.
    await expect(remote.resolve(header(k2), TOKEN)).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey)
    expect(jwks.hits).toBe(2)
    // A key published meanwhile is found on the next refetch after the cooldown.
    jwks.setKeys([k1, k2])
    clock.advance(5000)
    await remote.resolve(header(k2), TOKEN)
    expect(jwks.hits).toBe(3)
  })

  it('backs off for 1 s after a failed fetch (the cooldown, if shorter)', async () => {
    const k1 = await generateTestKey('ES256', 'k1')
    for (const [cooldownMs, backoff] of [
      [30_000, 1000],
      [200, 200],
    ] as const) {
      const { jwks, clock, remote } = await rig([k1], { cooldownMs })
      jwks.setMode('error500')
      await expect(remote.resolve(header(k1), TOKEN)).rejects.toBeInstanceOf(JwksUnavailable)
      expect(jwks.hits).toBe(1)
      expect(remote.retryAfterSec()).toBe(1)
      jwks.setMode('ok')
      await expect(remote.resolve(header(k1), TOKEN)).rejects.toThrow(/backing off/)
      clock.advance(backoff - 1)
      await expect(remote.resolve(header(k1), TOKEN)).rejects.toThrow(/backing off/)
      expect(jwks.hits).toBe(1)
      clock.advance(1)
      await remote.resolve(header(k1), TOKEN)
      expect(jwks.hits).toBe(2)
    }
  })

  it('does not use keys past cacheMaxAge when the refetch fails', async () => {
    const k1 = await generateTestKey('ES256', 'k1')
    const { jwks, clock, remote } = await rig([k1], { cacheMaxAgeMs: 1000 })
    await remote.resolve(header(k1), TOKEN)
    jwks.setMode('error500')
    clock.advance(1000)
    await expect(remote.resolve(header(k1), TOKEN)).rejects.toBeInstanceOf(JwksUnavailable)
    expect(remote.fresh()).toBe(false)
  })

  it('identifies keys by RFC 7638 thumbprint and serves only thumbprints of the current set', async () => {
    const [k1, k1b] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k1'),
    ])
    const { jwks, clock, remote } = await rig([k1], { cacheMaxAgeMs: 1000 })
    const key = await remote.resolve(header(k1), TOKEN)
    const id = await remote.identify(key)
    expect(id).toBe(await calculateJwkThumbprint(k1.jwk))
    expect(remote.serves(id)).toBe(true)
    expect(remote.serves(undefined)).toBe(false)
    jwks.setKeys([k1b]) // same kid, another key
    clock.advance(1000)
    expect(remote.serves(id)).toBe(false) // stale set: nothing is vouched for
    const replaced = await remote.resolve(header(k1), TOKEN)
    expect(remote.serves(id)).toBe(false)
    expect(remote.serves(await remote.identify(replaced))).toBe(true)
  })

  it('matches a key whose JWK pads the RSA modulus with a zero byte', async () => {
    const rsa = await generateTestKey('RS256', 'r1')
    const n = Buffer.concat([Buffer.alloc(1), Buffer.from(rsa.jwk.n ?? '', 'base64url')])
    const padded = { ...rsa, jwk: { ...rsa.jwk, n: n.toString('base64url') } }
    const { remote } = await rig([padded])
    const key = await remote.resolve(header(rsa), TOKEN)
    expect(remote.serves(await remote.identify(key))).toBe(true)
  })
})
