import { calculateJwkThumbprint, errors, type FlattenedJWSInput } from 'jose'
import { describe, expect, it, onTestFinished } from 'vitest'
import { fixedLocation } from '../../../src/auth/discovery.js'
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
  const remote = new RemoteJwks(fixedLocation(new URL(jwks.url)), {
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
    // The first unknown kid asks at once: the fetch at start does not hold it back.
    const misses = await Promise.allSettled(
      Array.from({ length: 20 }, () => remote.resolve(header(k2), TOKEN)),
    )
    expect(misses.every((m) => m.status === 'rejected')).toBe(true)
    expect(jwks.hits).toBe(2)
    // Within the cooldown of that refetch, unknown kids are refused without asking.
    clock.advance(4999)
    await expect(remote.resolve(header(k2), TOKEN)).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey)
    expect(jwks.hits).toBe(2)
    // A key published meanwhile is found on the next refetch after the cooldown.
    jwks.setKeys([k1, k2])
    clock.advance(1)
    await remote.resolve(header(k2), TOKEN)
    expect(jwks.hits).toBe(3)
  })

  it('finds a key rotated in right after a fetch by age (no lock-out for the cooldown)', async () => {
    const [k1, k2] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k2'),
    ])
    const { jwks, clock, remote } = await rig([k1], { cooldownMs: 30_000, cacheMaxAgeMs: 60_000 })
    await remote.resolve(header(k1), TOKEN)
    // The set ages out and is refetched for a k1 token...
    clock.advance(60_000)
    await remote.resolve(header(k1), TOKEN)
    expect(jwks.hits).toBe(2)
    // ...and one second later the authorization server replaces k1 with k2.
    jwks.setKeys([k2])
    clock.advance(1000)
    await remote.resolve(header(k2), TOKEN)
    expect(jwks.hits).toBe(3)
  })

  it('joins a refetch under way instead of refusing an unknown kid', async () => {
    const [k1, k2] = await Promise.all([
      generateTestKey('ES256', 'k1'),
      generateTestKey('ES256', 'k2'),
    ])
    const { jwks, remote } = await rig([k1], { cooldownMs: 30_000 })
    await remote.resolve(header(k1), TOKEN)
    jwks.setKeys([k1, k2])
    // A miss for a kid the server lacks starts the refetch; a k2 token arriving meanwhile joins it.
    const k3 = { alg: 'ES256', kid: 'k3' }
    const [first, second] = await Promise.allSettled([
      remote.resolve(k3, TOKEN),
      remote.resolve(header(k2), TOKEN),
    ])
    expect(first.status).toBe('rejected')
    expect(second.status).toBe('fulfilled')
    expect(jwks.hits).toBe(2)
  })

  it('uses a set for its Cache-Control max-age minus Age, within the bounds', async () => {
    const k1 = await generateTestKey('ES256', 'k1')
    const cases: [Record<string, string>, number][] = [
      [{ 'cache-control': 'public, max-age=120' }, 120_000],
      [{ 'cache-control': 'max-age=120', age: '100' }, 20_000],
      // Never beyond cacheMaxAge, never below the cooldown.
      [{ 'cache-control': 'max-age=86400' }, 600_000],
      [{ 'cache-control': 'max-age=2' }, 5000],
      [{ 'cache-control': 'no-cache' }, 5000],
      [{ 'cache-control': 'no-store, max-age=300' }, 5000],
      [{ 'cache-control': 'max-age=abc' }, 600_000],
      [{}, 600_000],
    ]
    for (const [headers, lifetime] of cases) {
      const { jwks, clock, remote } = await rig([k1], { cooldownMs: 5000 })
      jwks.setHeaders(headers)
      await remote.resolve(header(k1), TOKEN)
      clock.advance(lifetime - 1)
      expect(remote.fresh(), JSON.stringify(headers)).toBe(true)
      clock.advance(1)
      expect(remote.fresh(), JSON.stringify(headers)).toBe(false)
      await remote.resolve(header(k1), TOKEN)
      expect(jwks.hits).toBe(2)
    }
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
