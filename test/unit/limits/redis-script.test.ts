import pino from 'pino'
import { describe, expect, it, onTestFinished } from 'vitest'
import { rateOf, type Rate } from '../../../src/limits/gcra.js'
import { RedisRates } from '../../../src/limits/redis.js'
import { startRedis } from '../../helpers/cache.js'

/** The GCRA script against a real redis-server: same answers as limits/gcra.ts. */
async function setup(commandTimeoutMs = 2000) {
  const redis = await startRedis()
  // Redis decides here unless a test says otherwise: a generous timeout by default, so a loaded
  // machine never falls back.
  const rates = new RedisRates({
    url: redis.url,
    log: pino({ level: 'silent' }),
    prefix: 't:',
    commandTimeoutMs,
  })
  onTestFinished(() => rates.close())
  await expect.poll(() => rates.available).toBe(true)
  return { redis, rates }
}

/** A check of bucket `key` in table `table`, which holds at most `capacity` buckets. */
const check = (table: string, key: string, rate: Rate, capacity = 1000) => ({
  table,
  key,
  rate,
  capacity,
})

describe('GCRA script', () => {
  it('lets the burst through at once, then one per interval, and says when', async () => {
    const { redis, rates } = await setup()
    const c = check('l', 'a', rateOf(1, 60_000, 3)) // T = 60 s
    const results = []
    for (let i = 0; i < 4; i++) results.push((await rates.decide([c]))?.[0])
    expect(results.map((r) => r?.allowed)).toEqual([true, true, true, false])
    expect(results.map((r) => r?.full)).toEqual([false, false, false, false])
    expect(results.map((r) => r?.remaining)).toEqual([2, 1, 0, 0])
    // Refused: the next one is one interval away (less the ms since the third); reset ~3 T.
    expect(results[3]?.retryAfterMs).toBeGreaterThan(59_000)
    expect(results[3]?.retryAfterMs).toBeLessThanOrEqual(60_000)
    expect(results[3]?.resetMs).toBeGreaterThan(179_000)
    // The limit's table expires when its last bucket is idle again; the bucket is its TAT (ms,
    // Redis's clock) under the key's digest: three intervals from the first request.
    const pttl = await redis.client.pttl('t:l')
    expect(pttl).toBeGreaterThan(179_000)
    expect(pttl).toBeLessThanOrEqual(180_001)
    const [sec, micro] = await redis.client.time()
    const now = Number(sec) * 1000 + Number(micro) / 1000
    const tat = Number(await redis.client.zscore('t:l', 'a'))
    expect(tat - now).toBeGreaterThan(179_000)
    expect(tat - now).toBeLessThanOrEqual(180_000)
  })

  it('counts several limits all or nothing', async () => {
    const { redis, rates } = await setup()
    const wide = check('wide', 'k', rateOf(10, 60_000, 10))
    const narrow = check('narrow', 'k', rateOf(1, 60_000, 1))
    expect((await rates.decide([wide, narrow]))?.map((r) => r.allowed)).toEqual([true, true])
    const refused = await rates.decide([wide, narrow])
    expect(refused?.map((r) => r.allowed)).toEqual([true, false])
    const before = await redis.client.zscore('t:wide', 'k')
    // `wide` was not moved by the refused request.
    expect((await rates.decide([wide]))?.[0]?.remaining).toBe(8)
    expect(Number(await redis.client.zscore('t:wide', 'k'))).toBeGreaterThan(Number(before))
  })

  it('never drops a bucket that is not idle: a full table refuses the new key', async () => {
    const { redis, rates } = await setup()
    const rate = rateOf(1, 3_600_000, 1) // one an hour
    expect((await rates.decide([check('l', 'alice', rate, 2)]))?.[0]?.allowed).toBe(true)
    expect((await rates.decide([check('l', 'bob', rate, 2)]))?.[0]?.allowed).toBe(true)
    const full = (await rates.decide([check('l', 'mallory', rate, 2)]))?.[0]
    expect(full).toMatchObject({ allowed: false, full: true, remaining: 0 })
    // Until alice's bucket is idle (an hour from her request).
    expect(full?.retryAfterMs).toBeGreaterThan(3_590_000)
    // Nothing was forgotten: alice and bob are still over their limit, mallory has no bucket.
    expect((await rates.decide([check('l', 'alice', rate, 2)]))?.[0]).toMatchObject({
      allowed: false,
      full: false,
    })
    expect(await redis.client.zrange('t:l', 0, -1)).toEqual(['alice', 'bob'])
    // A request refused for room on one limit counts on none (all or nothing).
    const other = check('other', 'mallory', rateOf(10, 60_000, 10))
    const both = await rates.decide([other, check('l', 'mallory', rate, 2)])
    expect(both?.map((r) => [r.allowed, r.full])).toEqual([
      [true, false],
      [false, true],
    ])
    expect(await redis.client.exists('t:other')).toBe(0)
  })

  it('makes room by dropping idle buckets only', async () => {
    const { redis, rates } = await setup()
    const rate = rateOf(1, 3_600_000, 1)
    await rates.decide([check('l', 'alice', rate, 1)])
    // Alice's TAT moved into the past: her bucket is idle, what a fresh one would be.
    await redis.client.zadd('t:l', '1', 'alice')
    expect((await rates.decide([check('l', 'bob', rate, 1)]))?.[0]?.allowed).toBe(true)
    expect(await redis.client.zrange('t:l', 0, -1)).toEqual(['bob'])
  })

  it('loads the script again after SCRIPT FLUSH (a restarted Redis)', async () => {
    const { redis, rates } = await setup()
    const c = check('x', 'x', rateOf(5, 1000, 5))
    expect((await rates.decide([c]))?.[0]?.allowed).toBe(true)
    await redis.client.script('FLUSH')
    expect((await rates.decide([c]))?.[0]?.remaining).toBe(3)
  })

  it('answers undefined (decide locally) when Redis does not answer, and again once it does', async () => {
    const { redis, rates } = await setup(100)
    const c = check('p', 'p', rateOf(5, 1000, 5))
    redis.pause()
    const t0 = performance.now()
    expect(await rates.decide([c])).toBeUndefined()
    // Bounded by the command timeout (100 ms, the default), never the request's.
    expect(performance.now() - t0).toBeLessThan(1000)
    redis.resume()
    await expect
      .poll(async () => (await rates.decide([c]))?.[0]?.allowed, { timeout: 10_000 })
      .toBe(true)
  })
})
