import type { ServerResponse } from 'node:http'
import { describe, expect, it, onTestFinished } from 'vitest'
import { BoundedFetchFailure, fetchBounded } from '../../../src/auth/bounded-fetch.js'
import { closeServer, listenOn, startTrap } from '../../helpers/tokens.js'

/** Bounded fetches of identity-provider documents (docs/auth.md, Key fetching). */

async function serve(handler: (res: ServerResponse) => void) {
  let hits = 0
  let abandoned = 0
  const { server, url } = await listenOn((req, res) => {
    hits++
    req.resume()
    res.on('close', () => void (res.writableFinished || abandoned++))
    handler(res)
  })
  onTestFinished(() => closeServer(server))
  return {
    url,
    hits: () => hits,
    abandoned: () => abandoned,
  }
}

const get = async (url: string, maxBytes = 1000, timeoutMs = 10_000) =>
  (await fetchBounded(url, { method: 'GET', headers: {}, timeoutMs, maxBytes })).text

describe('fetchBounded', () => {
  it('returns a 200 body of exactly maxBytes and refuses one byte more', async () => {
    const s = await serve((res) => res.writeHead(200).end('a'.repeat(1000)))
    expect(await get(s.url, 1000)).toBe('a'.repeat(1000))
    await expect(get(s.url, 999)).rejects.toThrow('answer too large')
  })

  it('refuses a declared oversize body before any of it arrives', async () => {
    // Headers only: without the Content-Length check the read would wait for the deadline.
    const s = await serve((res) => {
      res.writeHead(200, { 'content-length': '1048576' })
      res.flushHeaders()
    })
    const started = performance.now()
    await expect(get(s.url, 1000, 10_000)).rejects.toThrow('answer too large')
    expect(performance.now() - started).toBeLessThan(2000)
    await expect.poll(() => s.abandoned()).toBe(1)
  })

  it('stops reading a chunked body at the cap and drops the connection', async () => {
    const chunk = Buffer.alloc(16 * 1024, 0x20)
    const s = await serve((res) => {
      res.writeHead(200)
      const pump = (): void => {
        while (!res.destroyed) if (!res.write(chunk)) return void res.once('drain', pump)
      }
      pump()
    })
    await expect(get(s.url, 64 * 1024)).rejects.toBeInstanceOf(BoundedFetchFailure)
    await expect.poll(() => s.abandoned()).toBe(1)
  })

  it.each([301, 302, 303, 307, 308])(
    'fails on a %i and never requests its Location',
    async (status) => {
      const trap = await startTrap()
      onTestFinished(() => trap.close())
      const s = await serve((res) => res.writeHead(status, { location: trap.url }).end())
      await expect(get(s.url)).rejects.toThrow(`answered ${status}, not followed`)
      expect(s.hits()).toBe(1)
      expect(trap.hits).toBe(0)
    },
  )

  it('fails on any other status', async () => {
    const s = await serve((res) => res.writeHead(204).end())
    await expect(get(s.url)).rejects.toThrow('answered 204')
  })

  it('holds one deadline over headers and body alike', async () => {
    const silent = await serve(() => undefined)
    await expect(get(silent.url, 1000, 200)).rejects.toThrow('timed out')
    const dripping = await serve((res) => {
      res.writeHead(200)
      const timer = setInterval(() => res.write(' '), 50)
      res.on('close', () => clearInterval(timer))
    })
    const started = performance.now()
    await expect(get(dripping.url, 1_000_000, 300)).rejects.toThrow('timed out')
    expect(performance.now() - started).toBeLessThan(2000)
    await expect.poll(() => dripping.abandoned()).toBe(1)
  })

  it('fails on an unreachable endpoint', async () => {
    await expect(get('http://127.0.0.1:1/jwks.json')).rejects.toThrow('unreachable')
  })
})
