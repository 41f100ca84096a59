import { describe, expect, it } from 'vitest'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'
import {
  claimsFor,
  generateTestKey,
  mintToken,
  startJwks,
  type TestKey,
} from '../helpers/tokens.js'
import { cacheGateway, post, type CacheGateway } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

const ISS = 'https://idp.example.com'
const PUBLIC = 'https://mcp.example.com'
const AUD = `${PUBLIC}/mcp/app`
const JSON_HEADERS = { 'content-type': 'application/json' }

/**
 * A backend whose resources/read answers are `private` and numbered, so a test can tell whose
 * answer a caller got: the backend never learns who asks (tokens are not passed through), so a
 * cache mix-up would show as another caller's number.
 */
async function numberedBackend(
  scope: 'private' | 'public',
  delayMs = 0,
): Promise<NonValidatingBackend> {
  let n = 0
  return closing(
    startNonValidatingBackend({
      toolsListCache: { ttlMs: 60_000, cacheScope: 'public' },
      behaviour: async (req, body) => {
        if (req.rpcMethod !== 'resources/read') return 'normal'
        const id = (body as { id: unknown }).id
        const text = `answer #${++n}`
        if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs))
        const result = {
          contents: [{ uri: 'docs://me', text }],
          resultType: 'complete',
          ttlMs: 60_000,
          cacheScope: scope,
        }
        return {
          status: 200,
          headers: JSON_HEADERS,
          body: JSON.stringify({ jsonrpc: '2.0', id, result }),
        }
      },
    }),
  )
}

async function authGateway(
  backend: NonValidatingBackend,
  cache: Record<string, unknown>,
): Promise<{ gw: CacheGateway; key: TestKey }> {
  const key = await generateTestKey('RS256')
  const jwks = await closing(startJwks([key]))
  const gw = await cacheGateway(backend.url, cache, {
    auth: { publicUrl: PUBLIC, jwt: { issuer: ISS, jwksUrl: jwks.url } },
  })
  return { gw, key }
}

async function reader(gw: CacheGateway, key: TestKey, sub: string, scope = 'mcp:read') {
  const token = await mintToken(claimsFor(ISS, AUD, { sub, scope }), { key })
  return async (id = '1'): Promise<string> => {
    const res = await post(
      gw.app,
      id,
      'resources/read',
      { uri: 'docs://me' },
      { authorization: `Bearer ${token}` },
    )
    expect(res.status).toBe(200)
    const result = res.response().result as { contents: { text: string }[] }
    return result.contents[0]?.text ?? ''
  }
}

describe('edge cache: private results', () => {
  it('are never stored without cache.private, even for the same caller', async () => {
    const backend = await numberedBackend('private')
    const { gw, key } = await authGateway(backend, {})
    const alice = await reader(gw, key, 'alice')
    expect(await alice()).toBe('answer #1')
    expect(await alice()).toBe('answer #2')
    expect(gw.cache?.cache.stats.entries).toBe(0)
  })

  it('with cache.private, hit for the same caller and are never served to another one', async () => {
    const backend = await numberedBackend('private')
    const { gw, key } = await authGateway(backend, { private: true })
    const alice = await reader(gw, key, 'alice')
    const bob = await reader(gw, key, 'bob')
    const aliceFewerScopes = await reader(gw, key, 'alice', 'mcp:other')
    expect(await alice()).toBe('answer #1')
    expect(await alice()).toBe('answer #1') // hit
    expect(await bob()).toBe('answer #2') // another subject: a miss, never alice's answer
    expect(await bob()).toBe('answer #2')
    expect(await aliceFewerScopes()).toBe('answer #3') // same subject, other scopes: another context
    expect(backend.calls('resources/read')).toHaveLength(3)
  })

  it('coalesce concurrent cold misses per authorization context (one backend request each)', async () => {
    const backend = await numberedBackend('private', 200)
    const { gw, key } = await authGateway(backend, { private: true })
    const alice = await reader(gw, key, 'alice')
    const bob = await reader(gw, key, 'bob')
    const answers = await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => alice(String(i))),
      ...Array.from({ length: 10 }, (_, i) => bob(String(i + 10))),
    ])
    const aliceSaw = new Set(answers.slice(0, 10))
    const bobSaw = new Set(answers.slice(10))
    expect(aliceSaw.size).toBe(1)
    expect(bobSaw.size).toBe(1)
    expect([...aliceSaw][0]).not.toBe([...bobSaw][0])
    expect(backend.calls('resources/read')).toHaveLength(2)
  })

  it('shares public answers across callers', async () => {
    const backend = await numberedBackend('public')
    const { gw, key } = await authGateway(backend, { private: true })
    const alice = await reader(gw, key, 'alice')
    const bob = await reader(gw, key, 'bob')
    expect(await alice()).toBe('answer #1')
    expect(await bob()).toBe('answer #1')
    expect(backend.calls('resources/read')).toHaveLength(1)
  })
})
