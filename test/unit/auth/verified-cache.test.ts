import { describe, expect, it } from 'vitest'
import { createVerifier } from '../../../src/auth/verifier.js'
import { configSchema } from '../../../src/config/schema.js'
import { claimsFor, generateTestKey, mintToken } from '../../helpers/tokens.js'

const ISS = 'https://idp.example.test'
const AUD = 'https://mcp.example.test/mcp/app'

async function setup(verifiedCacheMs = 60_000) {
  const key = await generateTestKey('ES256', 'k1')
  let served = true
  let lookups = 0
  const auth = configSchema.parse({
    servers: { app: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } },
    auth: { publicUrl: 'https://mcp.example.test', jwt: { issuer: ISS, jwksUrl: 'https://idp.example.test/jwks', verifiedCacheMs } },
  }).auth
  if (auth === undefined) throw new Error('no auth')
  const keys = {
    key: async () => {
      lookups++
      return key.publicKey
    },
    warm: () => true,
    retryAfterSec: () => 0,
    stillServes: (kid: string | undefined) => served && kid === 'k1',
  }
  const verifier = createVerifier(auth, '.', { maxTokenBytes: 8192, keys })
  return { key, verifier, lookups: () => lookups, rotateOut: () => void (served = false) }
}

describe('verified-token cache', () => {
  it('checks a token once and remembers the caller for later requests', async () => {
    const { key, verifier, lookups } = await setup()
    const token = await mintToken(claimsFor(ISS, AUD), { key })
    const a = await verifier.verify(token, AUD)
    const b = await verifier.verify(token, AUD)
    expect(b).toBe(a)
    expect(lookups()).toBe(1)
  })

  it('never lets a remembered check stand for another audience', async () => {
    const { key, verifier } = await setup()
    const token = await mintToken(claimsFor(ISS, AUD), { key })
    await verifier.verify(token, AUD)
    await expect(verifier.verify(token, 'https://mcp.example.test/mcp/other')).rejects.toMatchObject({ kind: 'invalid_token' })
  })

  it('forgets checks made by a key that rotated out of the set', async () => {
    const { key, verifier, lookups, rotateOut } = await setup()
    const token = await mintToken(claimsFor(ISS, AUD), { key })
    await verifier.verify(token, AUD)
    rotateOut()
    await verifier.verify(token, AUD)
    expect(lookups()).toBe(2)
  })

  it('never remembers a token past its exp', async () => {
    const { key, verifier, lookups } = await setup()
    const token = await mintToken(claimsFor(ISS, AUD, {}, 1), { key })
    await verifier.verify(token, AUD)
    await new Promise((r) => setTimeout(r, 1100))
    // Past exp the entry is gone and the real check (with its clock tolerance) runs again.
    await verifier.verify(token, AUD).catch(() => undefined)
    expect(lookups()).toBe(2)
  })

  it('verifies every request when verifiedCacheMs is 0', async () => {
    const { key, verifier, lookups } = await setup(0)
    const token = await mintToken(claimsFor(ISS, AUD), { key })
    await verifier.verify(token, AUD)
    await verifier.verify(token, AUD)
    expect(lookups()).toBe(2)
  })
})
