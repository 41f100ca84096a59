import { describe, expect, it } from 'vitest'
import {
  cacheEvents,
  cacheGateway,
  HAVE_REDIS,
  IN_CI,
  MISSING_REDIS as MISSING,
  post,
  slowRoute,
  startRedis,
} from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * The shared tier is in use from a gateway's first request (docs/cache.md §Shared tier): the
 * Redis connection is made before the listener opens, bounded, and never a reason not to start.
 * EdgeCache.sharedTier() says whether it is in use (connected, connecting, bypassed), for the
 * admin listener's readiness and status pages.
 */

const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const

if (!HAVE_REDIS && IN_CI) {
  describe('edge cache: the shared tier at start', () => {
    it('needs redis-server', () => {
      throw new Error(`${MISSING}: CI must provide it, so this is a failure here, not a skip`)
    })
  })
}

describe.skipIf(!HAVE_REDIS)(
  `edge cache: the shared tier at start${HAVE_REDIS ? '' : ` (skipped: ${MISSING})`}`,
  () => {
    it('makes the first list through one fresh gateway a hit through another fresh one', async () => {
      const redis = await startRedis()
      // A Redis a network hop away: a new connection takes a second to reach it (and commands
      // are given two before they count as failed).
      const far = await slowRoute(redis.url, 1000)
      const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
      const start = { cache: { redis: { commandTimeoutMs: 2000 } } }
      const a = await cacheGateway(backend.url, { redis: far }, {}, start)
      const b = await cacheGateway(backend.url, { redis: far }, {}, start)
      // Each listen stream, once acknowledged, drops what it covers (docs/cache.md
      // §Invalidation); both are up before the first list. Nothing waits for Redis here.
      await expect
        .poll(() => [a, b].every((g) => g.cache?.invalidator.isConnected('app') === true), {
          message: 'both listen streams',
        })
        .toBe(true)
      expect((await post(a.app, '1')).status).toBe(200)
      await expect
        .poll(async () => (await redis.client.dbsize()) === 1, { message: 'the entry in Redis' })
        .toBe(true)
      const viaB = await post(b.app, '2')
      expect(viaB.response()).toMatchObject({ id: 2, result: { tools: expect.any(Array) } })
      expect(backend.calls('tools/list')).toHaveLength(1)
      expect(await cacheEvents(b, 'shared_hit')).toBe(1)
      expect(a.cache?.cache.sharedTier()).toEqual({ state: 'connected' })
      expect(b.cache?.cache.sharedTier()).toEqual({ state: 'connected' })
    })

    it('says when the tier is bypassed and when it is connecting again', async () => {
      const redis = await startRedis()
      const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
      const gw = await cacheGateway(
        backend.url,
        { redis: redis.url },
        {},
        { cache: { redis: { breaker: { openMs: 200, maxOpenMs: 400 }, commandTimeoutMs: 100 } } },
      )
      expect(gw.cache?.cache.sharedTier()).toEqual({ state: 'connected' })
      redis.pause() // keeps its connections, answers nothing
      for (let i = 0; i < 4; i++)
        expect((await post(gw.app, String(i), 'tools/list', { cursor: `c${i}` })).status).toBe(200)
      expect(gw.cache?.cache.sharedTier()).toEqual({ state: 'bypassed', reason: 'not_answering' })
      redis.resume()
      let probe = 0
      await expect
        .poll(
          async () => {
            await post(gw.app, String(100 + probe), 'tools/list', { cursor: `p${probe++}` })
            return gw.cache?.cache.sharedTier()
          },
          { timeout: 10_000, interval: 100 },
        )
        .toEqual({ state: 'connected' })
      await redis.stop()
      await expect
        .poll(() => gw.cache?.cache.sharedTier(), { message: 'the lost connection' })
        .toEqual({ state: 'connecting' })
      // Memory and the backend answer meanwhile.
      expect((await post(gw.app, '200')).status).toBe(200)
    })

    it('starts memory-only, within its wait, when Redis refuses or never answers', async () => {
      const gone = await startRedis()
      await gone.stop() // its port now refuses connections
      const paused = await startRedis()
      paused.pause() // accepts connections, answers nothing
      const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
      for (const url of [gone.url, paused.url]) {
        const gw = await cacheGateway(
          backend.url,
          { redis: url },
          {},
          { cache: { redis: { startWaitMs: 300 } } },
        )
        expect(gw.cache?.cache.sharedTier()).toEqual({ state: 'connecting' })
        await expect
          .poll(() => gw.cache?.invalidator.isConnected('app'), { message: 'the listen stream' })
          .toBe(true)
        const calls = backend.calls('tools/list').length
        expect((await post(gw.app, '1')).status).toBe(200)
        expect((await post(gw.app, '2')).status).toBe(200) // from memory
        expect(backend.calls('tools/list')).toHaveLength(calls + 1)
      }
      paused.resume()
    })
  },
)
