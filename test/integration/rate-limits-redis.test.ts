import { spawn, type ChildProcess } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { mcpPost, type RawResponse } from '../helpers/clients.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * Two gateway PROCESSES (`mcp-edge serve` through tsx) sharing one real redis-server: a limit
 * holds across both, Redis going away falls back to per-replica shares without errors, and its
 * return makes the limit shared again. `RATE_LIMIT_LOAD_SECONDS` sets the load test's length
 * (60 s by default, the figure docs/rate-limits.md quotes).
 */

const LOAD_SECONDS = Number(process.env.RATE_LIMIT_LOAD_SECONDS ?? 60)

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address()
      srv.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0))
    })
  })
}

/** redis-server on a fixed port, so it can be killed and started again where the gateways look. */
async function redisOn(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
  onTestFinished(() => void child.kill('SIGKILL'))
  const ok = await new Promise<boolean>((resolve) => {
    let out = ''
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('Ready to accept connections')) resolve(true)
    })
    child.once('exit', () => resolve(false))
  })
  if (!ok) throw new Error(`redis-server did not start on ${port}`)
  return child
}

interface Gateway {
  readonly url: string
  /** Log lines written so far (stdout, JSON). */
  log(): string
}

/** Runs `mcp-edge serve` in its own process and waits for /healthz. */
async function serve(config: Record<string, unknown>, dir: string, name: string): Promise<Gateway> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort()
    const file = join(dir, `${name}.yaml`)
    await writeFile(file, stringify({ listen: { host: '127.0.0.1', port }, ...config }))
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', 'serve', '--config', file],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let out = ''
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()))
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()))
    let exited = false
    child.once('exit', () => (exited = true))
    onTestFinished(() => void child.kill('SIGKILL'))
    const url = `http://127.0.0.1:${port}`
    for (let i = 0; i < 400 && !exited; i++) {
      const up = await request(`${url}/healthz`).then(
        (r) => r.body.dump().then(() => r.statusCode === 200),
        () => false,
      )
      if (up) return { url: `${url}/mcp/app`, log: () => out }
      await sleep(50)
    }
    if (!out.includes('EADDRINUSE')) throw new Error(`gateway did not start: ${out}`)
  }
  throw new Error('no free port for the gateway')
}

const POLICY = `
rules:
  - name: everything
    servers: ["*"]
    allow: { tools: ["*"] }
limits:
  - name: shared
    servers: [app]
    tools: ["*"]
    key: header:X-User
    rate: 300/minute
    burst: 10
`

async function setup() {
  const backend = await closing(startSdkServer())
  const redisPort = await freePort()
  let redis = await redisOn(redisPort)
  const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-rl-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  await mkdir(join(dir, 'policies'))
  await writeFile(join(dir, 'policies', 'limits.yaml'), POLICY)
  const config = {
    log: { level: 'info' },
    policies: 'policies',
    // Redis decides while it is up, also on a loaded machine (a command that times out is decided
    // locally, which would skew the ±5 %); a killed Redis fails commands at once, timeout or not.
    rateLimits: { redis: `redis://127.0.0.1:${redisPort}`, replicas: 2, commandTimeoutMs: 1000 },
    servers: { app: { upstreams: [{ url: backend.url }] } },
  }
  const gateways = await Promise.all([serve(config, dir, 'a'), serve(config, dir, 'b')])
  for (const g of gateways)
    await expect.poll(() => g.log().includes('limits shared by every replica')).toBe(true)
  return {
    backend,
    gateways,
    kill: () => void redis.kill('SIGKILL'),
    restart: async () => {
      redis = await redisOn(redisPort)
    },
  }
}

function call(url: string, user: string, id: number): Promise<RawResponse> {
  return mcpPost(
    url,
    'tools/call',
    { name: 'whoami', arguments: {} },
    {
      id,
      headers: { 'x-user': user },
    },
  )
}

/** `clients` loops, each a request every `pauseMs`, alternating gateways, until `until`. */
async function load(
  urls: readonly string[],
  user: string,
  clients: number,
  pauseMs: number,
  until: () => boolean,
): Promise<Map<number, number>> {
  const statuses = new Map<number, number>()
  let id = 0
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = c; !until(); i++) {
        const res = await call(urls[i % urls.length] as string, user, ++id)
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
        await sleep(pauseMs)
      }
    }),
  )
  return statuses
}

describe('rate limits shared through Redis by two gateway processes', () => {
  it(
    `hold within ±5% over ${LOAD_SECONDS} s of load from several clients`,
    { timeout: LOAD_SECONDS * 1000 + 60_000 },
    async () => {
      const { backend, gateways } = await setup()
      const urls = gateways.map((g) => g.url)
      const start = performance.now()
      const end = start + LOAD_SECONDS * 1000
      // 4 clients at ~20 requests/s in all: four times the limit's 5/s.
      const statuses = await load(urls, 'alice', 4, 200, () => performance.now() >= end)
      const seconds = (performance.now() - start) / 1000
      const expected = 10 + 5 * seconds // burst + rate × time
      const allowed = statuses.get(200) ?? 0
      expect([...statuses.keys()].sort()).toEqual([200, 429]) // nothing else: no errors
      expect(allowed).toBeGreaterThanOrEqual(expected * 0.95)
      expect(allowed).toBeLessThanOrEqual(expected * 1.05)
      // Exactly the allowed calls reached the backend.
      expect(backend.calls('tools/call')).toHaveLength(allowed)
    },
  )

  it(
    'fall back to per-replica shares when Redis dies mid-load, and share again once it is back',
    { timeout: 150_000 },
    async () => {
      const { backend, gateways, kill, restart } = await setup()
      const urls = gateways.map((g) => g.url)
      let phase: 'shared' | 'down' | 'done' = 'shared'
      const running = load(urls, 'bob', 4, 50, () => phase === 'done')
      await sleep(1000)
      kill()
      phase = 'down'
      for (const g of gateways)
        await expect.poll(() => g.log().includes('rate limits: redis unavailable')).toBe(true)
      await sleep(1500)
      phase = 'done'
      const statuses = await running
      // Traffic went on under the limits: only answers and refusals, never a 5xx.
      expect([...statuses.keys()].sort()).toEqual([200, 429])
      expect(backend.calls('tools/call')).toHaveLength(statuses.get(200) ?? 0)
      // Down: each replica holds half the burst (5): a fresh key gets 5 through one gateway.
      const local = []
      for (let i = 0; i < 10; i++) local.push((await call(urls[0] as string, 'carol', i)).status)
      expect(local.filter((s) => s === 200)).toHaveLength(5)
      await restart()
      // Each gateway's connection comes back on its own backoff (at most 5 s between attempts,
      // redis/client.ts), then says so again.
      const connected = (g: Gateway): number =>
        g.log().split('limits shared by every replica').length - 1
      for (const g of gateways)
        await expect.poll(() => connected(g), { timeout: 20_000, interval: 100 }).toBe(2)
      // Back: one shared bucket again, so a fresh key gets the whole burst (10) through one gateway,
      // and the other gateway shares it: that key has nothing left there either. Each gateway's
      // breaker finds Redis again on its own probe, which waits out its bypass period (at most
      // 30 s, redis/breaker.ts); a probe that fails as Redis comes back starts one more such
      // period, so both are polled for two of them until both share.
      let n = 0
      await expect
        .poll(
          async () => {
            const user = `dave-${++n}`
            let passed = 0
            for (let i = 0; i < 11; i++)
              if ((await call(urls[0] as string, user, i)).status === 200) passed++
            const other = (await call(urls[1] as string, user, 99)).status
            return { passed, other }
          },
          { timeout: 70_000, interval: 200 },
        )
        .toEqual({ passed: 10, other: 429 })
    },
  )
})
