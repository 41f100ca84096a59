import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { connect, createServer, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { onTestFinished } from 'vitest'
import type { RunningGateway, StartOptions } from '../../src/server.js'
import { envelope, mcpHeaders, rawPost, type RawResponse } from './clients.js'
import { startTestGateway, type TestGateway } from './gateway.js'

/** A gateway for cache tests: its log lines and the URL of server `app`. */
export interface CacheGateway extends TestGateway {
  readonly app: string
}

/** Fast listen reconnects so tests never wait out production backoff. */
export const FAST_INVALIDATOR = {
  baseDelayMs: 20,
  maxDelayMs: 200,
  unsupportedRetryMs: 60_000,
  resubscribeDelayMs: 20,
}

/**
 * Starts a gateway (closed when the test ends) with `cache` in front of `url` as server `app`,
 * debug logs and fast listen reconnects; `extra` adds or replaces top-level config keys.
 */
export async function cacheGateway(
  url: string,
  cache: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  opts: Omit<StartOptions, 'logDestination'> & { dir?: string } = {},
): Promise<CacheGateway> {
  const { dir, ...start } = opts
  const gw = await startTestGateway(
    { log: { level: 'debug' }, cache, servers: { app: { upstreams: [{ url }] } }, ...extra },
    {
      ...(dir === undefined ? {} : { dir }),
      closeMs: 100,
      start: { watch: false, ...start, cache: { invalidator: FAST_INVALIDATOR, ...start.cache } },
    },
  )
  return Object.assign(gw, { app: gw.mcpUrl('app') })
}

/** A cache clock that moves only when told (StartOptions.cache.now): tests age entries without sleeping. */
export function manualClock(start = Date.now()): { now: () => number; advance(ms: number): void } {
  let t = start
  return {
    now: () => t,
    advance: (ms) => {
      t += ms
    },
  }
}

/** A modern request body with `rawId` spliced in verbatim (big integers, escapes). */
export function rawBody(
  rawId: string,
  method = 'tools/list',
  params: Record<string, unknown> = {},
): string {
  const p = JSON.stringify({
    ...params,
    _meta: { ...envelope(), ...(params._meta as object | undefined) },
  })
  return `{"jsonrpc":"2.0","id":${rawId},"method":${JSON.stringify(method)},"params":${p}}`
}

/** POSTs a modern request with id `rawId`. */
export function post(
  url: string,
  rawId: string,
  method = 'tools/list',
  params: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const name = typeof params.uri === 'string' ? params.uri : undefined
  return rawPost(url, rawBody(rawId, method, params), { ...mcpHeaders(method, name), ...headers })
}

/** The value of one cache event counter. */
export async function cacheEvents(gw: RunningGateway, event: string): Promise<number> {
  const metric = await gw.metrics.cacheEvents.get()
  return metric.values.find((v) => v.labels.event === event)?.value ?? 0
}

/** Whether redis-server can be started here (CI must have it: see cache-redis.test.ts). */
export const HAVE_REDIS = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0
export const IN_CI = (process.env.CI ?? '') !== '' && process.env.CI !== 'false'
export const MISSING_REDIS =
  'redis-server is not on PATH (Debian package redis-server; .ci/run installs it)'

/** A throwaway redis-server on a free loopback port, without persistence. */
export interface TestRedis {
  readonly url: string
  readonly client: Redis
  /** SIGSTOP: the server keeps its connections open and answers nothing. */
  pause(): void
  /** SIGCONT after pause(). */
  resume(): void
  stop(): Promise<void>
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      srv.close(() => resolve(port))
    })
  })
}

/** Resolves true once the server says it is ready, false if it exits first. */
function ready(child: ChildProcess): Promise<boolean> {
  return new Promise((resolve) => {
    let out = ''
    const timer = setTimeout(() => resolve(false), 10_000)
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes('Ready to accept connections')) {
        clearTimeout(timer)
        resolve(true)
      }
    })
    child.once('exit', () => {
      clearTimeout(timer)
      resolve(false)
    })
  })
}

/** Starts redis-server (retrying on a port someone else grabbed meanwhile); stopped after the test. */
export async function startRedis(): Promise<TestRedis> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort()
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    if (!(await ready(child))) {
      child.kill('SIGKILL')
      continue
    }
    const url = `redis://127.0.0.1:${port}`
    const client = new Redis(url, { maxRetriesPerRequest: 1 })
    let stopped = false
    const stop = async (): Promise<void> => {
      if (stopped) return
      stopped = true
      client.disconnect()
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGCONT') // a stopped process handles SIGTERM only once it runs again
      child.kill('SIGTERM')
      await exited
    }
    onTestFinished(stop)
    return {
      url,
      client,
      pause: () => void child.kill('SIGSTOP'),
      resume: () => void child.kill('SIGCONT'),
      stop,
    }
  }
  throw new Error('redis-server did not start on any of 5 ports')
}

/** Whether a gateway's shared tier has reached Redis (first connection, or back after a failure). */
export function redisConnected(gw: { readonly logs: readonly Record<string, unknown>[] }): boolean {
  return gw.logs.some(
    (l) =>
      l.msg === 'cache: redis connected' ||
      l.msg === 'cache: redis is back; shared tier active again',
  )
}

/**
 * A TCP relay to `url`'s Redis that holds each new connection `delayMs` before its first bytes
 * reach Redis (a slow route or handshake to another zone), then relays it as it is. Returns the
 * relay's redis:// URL; closed when the test ends.
 */
export async function slowRoute(url: string, delayMs: number): Promise<string> {
  const target = new URL(url)
  const sockets = new Set<Socket>()
  const relay = createServer((client) => {
    sockets.add(client)
    client.pause()
    client.on('error', () => undefined)
    client.on('close', () => sockets.delete(client))
    const timer = setTimeout(() => {
      const upstream = connect(Number(target.port), target.hostname)
      sockets.add(upstream)
      upstream.on('error', () => client.destroy())
      upstream.on('close', () => {
        sockets.delete(upstream)
        client.destroy()
      })
      client.on('close', () => upstream.destroy())
      client.pipe(upstream).pipe(client)
      client.resume()
    }, delayMs)
    client.on('close', () => clearTimeout(timer))
  })
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        relay.close(() => resolve())
      }),
  )
  const address = relay.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return `redis://127.0.0.1:${port}`
}
