import { createServer, connect, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { connectRedis } from '../../src/redis/client.js'
import { HAVE_REDIS, IN_CI, MISSING_REDIS, startRedis } from '../helpers/cache.js'

/**
 * A real Redis behind a TCP relay that holds back each connection's first answer: the shape of a
 * Redis slow to answer a new connection (cold start, far region, TLS proxy) but quick afterwards.
 */
async function slowFirstAnswer(target: string, delayMs: number) {
  const { port, hostname } = new URL(target)
  const sockets = new Set<Socket>()
  const relay = createServer((client) => {
    const upstream = connect(Number(port), hostname)
    sockets.add(client).add(upstream)
    let first = true
    upstream.on('data', (chunk: Buffer) => {
      if (!first) return void client.write(chunk)
      first = false
      upstream.pause()
      setTimeout(() => {
        client.write(chunk)
        upstream.resume()
      }, delayMs)
    })
    client.on('data', (chunk: Buffer) => upstream.write(chunk))
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('close', close).on('error', close)
    upstream.on('close', close).on('error', close)
  })
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        relay.close(() => resolve())
      }),
  )
  return `redis://127.0.0.1:${(relay.address() as AddressInfo).port}`
}

if (!HAVE_REDIS && IN_CI) {
  describe('the Redis connection', () => {
    it('needs redis-server', () => {
      throw new Error(`${MISSING_REDIS}: CI must provide it, so this is a failure here, not a skip`)
    })
  })
}

describe.skipIf(!HAVE_REDIS)('the Redis connection', () => {
  it('becomes ready when a new connection answers slower than the command timeout', async () => {
    const redis = await startRedis()
    const url = await slowFirstAnswer(redis.url, 400)
    const client = connectRedis(url, 100)
    onTestFinished(() => client.disconnect())
    client.on('error', () => {})
    await expect.poll(() => client.status, { timeout: 5000, interval: 50 }).toBe('ready')
    // From then on, requests run under the short timeout again.
    expect(client.options.commandTimeout).toBe(100)
    expect(await client.ping()).toBe('PONG')
  })
})
