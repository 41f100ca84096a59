import { describe, expect, it } from 'vitest'
import { startNonValidatingBackend, startSdkServer } from '../helpers/sdk-servers.js'
import {
  cacheEvents,
  cacheGateway,
  HAVE_REDIS,
  IN_CI,
  MISSING_REDIS as MISSING,
  post,
  redisConnected,
  startRedis,
} from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const

if (!HAVE_REDIS && IN_CI) {
  describe('edge cache: shared Redis tier', () => {
    it('needs redis-server', () => {
      throw new Error(`${MISSING}: CI must provide it, so this is a failure here, not a skip`)
    })
  })
}

if (!HAVE_REDIS && !IN_CI) process.stderr.write(`cache-redis.test.ts: skipped, ${MISSING}\n`)

describe.skipIf(!HAVE_REDIS)(
  `edge cache: shared Redis tier${HAVE_REDIS ? '' : ` (skipped: ${MISSING})`}`,
  () => {
    it('makes a list fetched through one gateway a hit through another that shares only Redis', async () => {
      const redis = await startRedis()
      const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
      const a = await cacheGateway(backend.url, { redis: redis.url })
      const b = await cacheGateway(backend.url, { redis: redis.url })
      await expect
        .poll(() => [a, b].every(redisConnected), { message: 'both gateways connected to Redis' })
        .toBe(true)
      expect((await post(a.app, '1')).status).toBe(200)
      await expect
        .poll(async () => (await redis.client.dbsize()) === 1, { message: 'the entry in Redis' })
        .toBe(true)
      const [key] = await redis.client.keys('*')
      expect(key).toMatch(/^mcp-edge:c1:app~[\w-]+:tools\/list:-:/)
      expect(await redis.client.pttl(key ?? '')).toBeGreaterThan(50_000)

      const viaB = await post(b.app, '12345678901234567890')
      expect(viaB.text.startsWith('{"jsonrpc":"2.0","id":12345678901234567890,"result":{')).toBe(
        true,
      )
      expect(backend.calls('tools/list')).toHaveLength(1)
      expect(await cacheEvents(b, 'shared_hit')).toBe(1)
      // B keeps it in memory now: no second trip to Redis.
      await post(b.app, '2')
      expect(await cacheEvents(b, 'shared_hit')).toBe(1)
      expect(backend.calls('tools/list')).toHaveLength(1)
    })

    it('drops shared entries when the backend says the list changed', async () => {
      const redis = await startRedis()
      const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
      const a = await cacheGateway(backend.url, { redis: redis.url })
      const b = await cacheGateway(backend.url, { redis: redis.url })
      await expect
        .poll(
          () =>
            [a, b].every(
              (g) => redisConnected(g) && g.cache?.invalidator.isConnected('app') === true,
            ),
          { message: 'both listen streams and Redis connections' },
        )
        .toBe(true)
      await post(a.app, '1')
      await expect
        .poll(async () => (await redis.client.dbsize()) === 1, { message: 'the entry in Redis' })
        .toBe(true)
      await post(b.app, '2')
      expect(backend.calls('tools/list')).toHaveLength(1)
      backend.notify.toolsChanged()
      await expect
        .poll(async () => (await redis.client.dbsize()) === 0, {
          message: 'the shared entry to be dropped',
        })
        .toBe(true)
      await expect
        .poll(() => a.cache?.cache.stats.entries === 0 && b.cache?.cache.stats.entries === 0, {
          message: 'memory tiers dropped',
        })
        .toBe(true)
      await post(b.app, '3')
      expect(backend.calls('tools/list')).toHaveLength(2)
    })

    it('keeps answering from memory and the backend when Redis goes away', async () => {
      const redis = await startRedis()
      const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
      const gw = await cacheGateway(backend.url, { redis: redis.url })
      await expect.poll(() => redisConnected(gw), { message: 'the Redis connection' }).toBe(true)
      await post(gw.app, '1')
      await redis.stop()
      expect((await post(gw.app, '2')).status).toBe(200) // memory hit
      expect((await post(gw.app, '3', 'tools/list', { cursor: 'other' })).status).toBe(200) // miss
      expect(backend.calls('tools/list')).toHaveLength(2)
      await expect
        .poll(() => gw.logs.some((l) => String(l.msg).includes('redis unavailable')), {
          message: 'the degraded log line',
        })
        .toBe(true)
    })

    it('bypasses a Redis that stops answering instead of waiting out every command, then uses it again', async () => {
      const redis = await startRedis()
      const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
      const gw = await cacheGateway(backend.url, { redis: redis.url })
      await expect.poll(() => redisConnected(gw), { message: 'the Redis connection' }).toBe(true)
      redis.pause() // SIGSTOP: the connection stays open, nothing is answered
      const misses = 20
      const started = performance.now()
      for (let i = 0; i < misses; i++) {
        const res = await post(gw.app, String(i), 'tools/list', { cursor: `page-${i}` })
        expect(res.status).toBe(200)
      }
      // Without a breaker each miss waits 250 ms for Redis: at least 5 s for these 20.
      expect(performance.now() - started).toBeLessThan(misses * 250)
      expect(await cacheEvents(gw, 'shared_bypass')).toBeGreaterThanOrEqual(misses - 5)
      expect(await cacheEvents(gw, 'shared_error')).toBeGreaterThanOrEqual(3)
      expect(backend.calls('tools/list')).toHaveLength(misses)
      expect(gw.logs.some((l) => l.msg === 'cache: redis is not answering; bypassing it')).toBe(
        true,
      )

      redis.resume()
      let probes = 0
      // After the bypass period one probe finds it again, and the shared tier is used once more.
      await expect
        .poll(
          async () => {
            const res = await post(gw.app, '"probe"', 'tools/list', { cursor: `p${probes++}` })
            expect(res.status).toBe(200)
            return gw.logs.some(
              (l) => l.msg === 'cache: redis answers again; shared tier active again',
            )
          },
          { timeout: 15_000, interval: 200 },
        )
        .toBe(true)
      await expect
        .poll(async () => (await redis.client.dbsize()) > 0, { message: 'an entry written again' })
        .toBe(true)
    })

    it('sends the drops a bypassed Redis missed before reading it again', async () => {
      const redis = await startRedis()
      const backend = await closing(startSdkServer({ cacheHints: { 'tools/list': PUBLIC_60S } }))
      const gw = await cacheGateway(backend.url, { redis: redis.url })
      await expect
        .poll(() => redisConnected(gw) && gw.cache?.invalidator.isConnected('app') === true, {
          message: 'the listen stream and the Redis connection',
        })
        .toBe(true)
      await post(gw.app, '1')
      await expect
        .poll(async () => (await redis.client.dbsize()) === 1, { message: 'the entry in Redis' })
        .toBe(true)
      redis.pause()
      for (let i = 0; i < 3; i++)
        await post(gw.app, String(10 + i), 'prompts/list', { cursor: `c${i}` })
      expect(gw.logs.some((l) => l.msg === 'cache: redis is not answering; bypassing it')).toBe(
        true,
      )
      backend.notify.toolsChanged() // the drop cannot reach Redis now
      await expect
        .poll(() => gw.cache?.cache.stats.entries === 0, { message: 'the memory tier dropped' })
        .toBe(true)
      redis.resume()
      let probes = 0
      await expect
        .poll(
          async () => {
            await post(gw.app, String(100 + probes), 'prompts/list', { cursor: `p${probes++}` })
            return gw.logs.some(
              (l) => l.msg === 'cache: redis answers again; shared tier active again',
            )
          },
          { timeout: 15_000, interval: 200 },
        )
        .toBe(true)
      const hits = await cacheEvents(gw, 'shared_hit')
      await post(gw.app, '2')
      // The entry stored before the notification was dropped from Redis, not served from it.
      expect(await cacheEvents(gw, 'shared_hit')).toBe(hits)
      expect(backend.calls('tools/list')).toHaveLength(2)
    })
  },
)
