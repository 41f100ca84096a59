import pino from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { rateOf } from '../../../src/limits/gcra.js'
import { RedisRates } from '../../../src/limits/redis.js'
import { startRedis } from '../../helpers/cache.js'

/** The GCRA script against a real redis-server: same answers as limits/gcra.ts. */
async function setup() {
  const redis = await startRedis()
  const rates = new RedisRates({ url: redis.url, log: pino({ level: 'silent' }), prefix: 't:' })
  onTestFinished(() => rates.close())
  await expect.poll(() => rates.available).toBe(true)
  return { redis, rates }
}

describe('GCRA script', () => {
  it('lets the burst through at once, then one per interval, and says when', async () => {
    const { redis, rates } = await setup()
    const check = { key: 'a', rate: rateOf(1, 60_000, 3) } // T = 60 s
    const results = []
    for (let i = 0; i < 4; i++) results.push((await rates.decide([check]))?.[0])
    expect(results.map((r) => r?.allowed)).toEqual([true, true, true, false])
    expect(results.map((r) => r?.remaining)).toEqual([2, 1, 0, 0])
    // Refused: the next one is one interval away (less the ms since the third); reset ~3 T.
    expect(results[3]?.retryAfterMs).toBeGreaterThan(59_000)
    expect(results[3]?.retryAfterMs).toBeLessThanOrEqual(60_000)
    expect(results[3]?.resetMs).toBeGreaterThan(179_000)
    // The key expires when it is idle again, and holds a TAT with microsecond decimals.
    const pttl = await redis.client.pttl('t:a')
    expect(pttl).toBeGreaterThan(179_000)
    expect(pttl).toBeLessThanOrEqual(180_001)
    expect(await redis.client.get('t:a')).toMatch(/^\d+\.\d{3}$/)
  })

  it('counts several limits all or nothing', async () => {
    const { redis, rates } = await setup()
    const wide = { key: 'wide', rate: rateOf(10, 60_000, 10) }
    const narrow = { key: 'narrow', rate: rateOf(1, 60_000, 1) }
    expect((await rates.decide([wide, narrow]))?.map((r) => r.allowed)).toEqual([true, true])
    const refused = await rates.decide([wide, narrow])
    expect(refused?.map((r) => r.allowed)).toEqual([true, false])
    const before = await redis.client.get('t:wide')
    // `wide` was not moved by the refused request.
    expect((await rates.decide([wide]))?.[0]?.remaining).toBe(8)
    expect(Number(await redis.client.get('t:wide'))).toBeGreaterThan(Number(before))
  })

  it('loads the script again after SCRIPT FLUSH (a restarted Redis)', async () => {
    const { redis, rates } = await setup()
    expect((await rates.decide([{ key: 'x', rate: rateOf(5, 1000, 5) }]))?.[0]?.allowed).toBe(true)
    await redis.client.script('FLUSH')
    expect((await rates.decide([{ key: 'x', rate: rateOf(5, 1000, 5) }]))?.[0]?.remaining).toBe(3)
  })

  it('answers undefined (decide locally) when Redis does not answer, and again once it does', async () => {
    const { redis, rates } = await setup()
    const check = { key: 'p', rate: rateOf(5, 1000, 5) }
    redis.pause()
    const t0 = performance.now()
    expect(await rates.decide([check])).toBeUndefined()
    // Bounded by the command timeout, never the request's.
    expect(performance.now() - t0).toBeLessThan(1000)
    redis.resume()
    await expect
      .poll(async () => (await rates.decide([check]))?.[0]?.allowed, { timeout: 10_000 })
      .toBe(true)
  })
})
