import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'
import {
  cacheEvents,
  cacheGateway,
  FAST_INVALIDATOR,
  HAVE_REDIS,
  MISSING_REDIS,
  post,
  redisConnected,
  startRedis,
  type CacheGateway,
  type TestRedis,
} from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

/**
 * Whoever can write to the shared Redis tier can put bytes in front of every replica. A value read
 * from it is therefore checked as strictly as a backend's answer before it is served or copied to
 * memory (docs/cache.md §Shared tier): anything else is dropped, counted, and the request goes to
 * the backend as a miss. The tests plant values under the exact key a real answer was stored
 * under, then ask a second gateway that has only Redis in common with the first.
 */

const PUBLIC_60S = { ttlMs: 60_000, cacheScope: 'public' } as const
const GOOD_RESULT = '{"tools":[{"name":"echo"}],"resultType":"complete","cacheScope":"public"}'

interface Planted {
  readonly redis: TestRedis
  readonly backend: NonValidatingBackend
  readonly key: string
  readonly head: Record<string, unknown>
}

/** Stores a real tools/list answer through one gateway and returns its Redis key and header. */
async function stored(): Promise<Planted> {
  const redis = await startRedis()
  const backend = await closing(startNonValidatingBackend({ toolsListCache: PUBLIC_60S }))
  const writer = await cacheGateway(backend.url, { redis: redis.url })
  await expect.poll(() => redisConnected(writer), { message: 'the Redis connection' }).toBe(true)
  expect((await post(writer.app, '1')).status).toBe(200)
  await expect
    .poll(async () => (await redis.client.dbsize()) === 1, { message: 'the entry in Redis' })
    .toBe(true)
  const [key] = await redis.client.keys('*')
  const value = (await redis.client.getBuffer(key as string)) as Buffer
  const head = JSON.parse(value.subarray(0, value.indexOf(0x0a)).toString()) as Record<
    string,
    unknown
  >
  return { redis, backend, key: key as string, head }
}

/** Overwrites the entry with `head` (merged over the real one) and `result` bytes. */
async function plant(
  p: Planted,
  result: string,
  head: Record<string, unknown> = {},
  pxMs = 60_000,
): Promise<Buffer> {
  const h = { ...p.head, bytes: Buffer.byteLength(result), pxMs, ...head }
  const value = Buffer.from(`${JSON.stringify(h)}\n${result}`)
  await p.redis.client.set(p.key, value, 'PX', pxMs)
  return value
}

/** A second gateway sharing only Redis; it asks Redis on its first miss. */
async function reader(
  p: Planted,
  extra: Record<string, unknown> = {},
  opts: Parameters<typeof cacheGateway>[3] = {},
): Promise<CacheGateway> {
  const gw = await cacheGateway(
    p.backend.url,
    { redis: p.redis.url, maxTtlMs: 60_000 },
    extra,
    opts,
  )
  await expect.poll(() => redisConnected(gw), { message: 'the Redis connection' }).toBe(true)
  return gw
}

/** The planted value was refused: the backend answered with the requester's id, and it was counted. */
async function expectRefused(p: Planted, planted: Buffer, gw: CacheGateway): Promise<void> {
  const before = p.backend.calls('tools/list').length
  const res = await post(gw.app, '"mine"')
  expect(res.status).toBe(200)
  expect(res.text).not.toContain('evil')
  const message = res.json() as { id: unknown; result: { tools: { name: string }[] } }
  expect(message.id).toBe('mine')
  expect(message.result.tools.map((t) => t.name)).toEqual(['echo', 'search', 'delete_repo'])
  expect(p.backend.calls('tools/list')).toHaveLength(before + 1)
  expect(await cacheEvents(gw, 'shared_rejected')).toBe(1)
  expect(await cacheEvents(gw, 'shared_hit')).toBe(0)
  // Dropped from Redis; the backend's fresh answer took its place.
  await expect
    .poll(
      async () => {
        const now = await p.redis.client.getBuffer(p.key)
        return now !== null && !now.equals(planted)
      },
      { message: 'the planted value to be replaced' },
    )
    .toBe(true)
  expect(gw.logs.some((l) => l.msg === 'cache: dropped an invalid shared entry')).toBe(true)
}

describe.skipIf(!HAVE_REDIS)(
  `edge cache: values read from Redis are checked${HAVE_REDIS ? '' : ` (skipped: ${MISSING_REDIS})`}`,
  () => {
    it('an empty result {} is never served (it would splice into invalid JSON)', async () => {
      const p = await stored()
      const planted = await plant(p, '{}')
      await expectRefused(p, planted, await reader(p))
    })

    it('bytes that close the result and add their own "id" never reach the client', async () => {
      const p = await stored()
      const planted = await plant(
        p,
        '{"tools":[],"resultType":"complete","cacheScope":"public"},"id":"evil","x":{"a":1}',
      )
      await expectRefused(p, planted, await reader(p))
    })

    it('a result with its own ttlMs, extra whitespace or duplicate keys is not in the form the gateway writes', async () => {
      for (const result of [
        '{"tools":[],"resultType":"complete","cacheScope":"public","ttlMs":1}',
        '{"tools":[], "resultType":"complete","cacheScope":"public"}',
        '{"tools":[],"resultType":"complete","cacheScope":"public","tools":[{"name":"x"}]}',
      ]) {
        const p = await stored()
        const planted = await plant(p, result)
        await expectRefused(p, planted, await reader(p))
      }
    })

    it('a result of the wrong shape, scope, method or kind is refused', async () => {
      const cases: [string, Record<string, unknown>][] = [
        ['{"tools":{"0":{"name":"x"}},"resultType":"complete","cacheScope":"public"}', {}],
        ['{"tools":[],"resultType":"input_required","cacheScope":"public"}', {}],
        ['{"tools":[],"resultType":"complete","cacheScope":"private"}', {}],
        [GOOD_RESULT, { scope: 'private' }],
        [GOOD_RESULT, { method: 'prompts/list' }],
        [GOOD_RESULT, { server: 'other~000000000000' }],
        [GOOD_RESULT, { lifeMs: 120_000, ttlMs: 60_000 }],
      ]
      for (const [result, head] of cases) {
        const p = await stored()
        const planted = await plant(p, result, head)
        await expectRefused(p, planted, await reader(p))
      }
    })

    it('a policy-filtered hit on a planted non-JSON value is a miss, not a 500', async () => {
      const p = await stored()
      const planted = await plant(p, '{"tools":[]},{"resultType":"complete"}')
      const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-cache-trust-'))
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
      writeFileSync(
        join(dir, 'main.yaml'),
        'rules:\n  - name: all\n    servers: ["*"]\n    allow:\n      tools: ["*"]\n',
      )
      const gw = await reader(p, { policies: '.' }, { dir })
      await expectRefused(p, planted, gw)
    })

    it('a lifetime longer than maxTtlMs is capped when the entry is copied to memory', async () => {
      const p = await stored()
      // Claims to stay fresh for a day, and Redis would keep it that long.
      const day = 86_400_000
      await plant(p, GOOD_RESULT, { ttlMs: day, lifeMs: day }, day)
      let clock = 1_000_000
      const gw = await reader(p, {}, { cache: { invalidator: FAST_INVALIDATOR, now: () => clock } })
      const first = await post(gw.app, '1')
      expect(first.status).toBe(200)
      expect(await cacheEvents(gw, 'shared_hit')).toBe(1)
      const calls = p.backend.calls('tools/list').length
      await p.redis.client.del(p.key)
      clock += 60_001 // past this gateway's maxTtlMs (60 s)
      const later = await post(gw.app, '2')
      expect(later.status).toBe(200)
      // The memory copy expired with maxTtlMs: the backend was asked again.
      expect(p.backend.calls('tools/list')).toHaveLength(calls + 1)
    })
  },
)
