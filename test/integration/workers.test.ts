import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client, request } from 'undici'
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { mcpBody, mcpHeaders } from '../helpers/clients.js'

/** Health-check interval of the gateways below: probes of one checker are at least this apart. */
const INTERVAL_MS = 300

interface Backend {
  url: string
  /** Arrival times of health probes (server/discover). */
  readonly probes: number[]
  /** Client port of the gateway connection each tools/call came on. */
  readonly callPorts: number[]
  inFlight: number
}

/** A backend that answers every call, `slow` after `slowMs`, and notes probes and connections. */
async function startBackend(slowMs = 1500): Promise<Backend> {
  const backend: Backend = { url: '', probes: [], callPorts: [], inFlight: 0 }
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const msg = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        id: unknown
        method: string
        params?: { name?: string }
      }
      if (msg.method === 'server/discover') backend.probes.push(performance.now())
      else backend.callPorts.push(req.socket.remotePort ?? 0)
      const answer = (): void => {
        backend.inFlight--
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [] } }))
      }
      backend.inFlight++
      if (msg.params?.name === 'slow') setTimeout(answer, slowMs)
      else answer()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  backend.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  return backend
}

interface Served {
  readonly file: string
  readonly base: string
  readonly admin: string
  readonly exited: Promise<number | null>
  readonly lines: Record<string, unknown>[]
  /** The primary's process id. */
  readonly pid: number
  signal(sig: NodeJS.Signals): void
}

/**
 * Runs `node dist/cli.js serve` (compiled by `npm ci` / `npm run build`: a cluster forks the
 * script it runs, and compiled workers start in a fraction of tsx's time) with `workers: 2`,
 * port 0 for both listeners, and reads the JSON log from stdout.
 */
async function serveWorkers(upstream: string, config = workersConfig(upstream)): Promise<Served> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-workers-'))
  const file = join(dir, 'gateway.yaml')
  await writeFile(file, config)
  const child = spawn(process.execPath, ['dist/cli.js', 'serve', '--config', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  onTestFinished(() => void child.kill('SIGKILL'))
  const lines: Record<string, unknown>[] = []
  let rest = ''
  child.stdout.on('data', (d: Buffer) => {
    const parts = (rest + d.toString('utf8')).split('\n')
    rest = parts.pop() ?? ''
    for (const p of parts)
      if (p.startsWith('{')) lines.push(JSON.parse(p) as Record<string, unknown>)
  })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  const find = (role: string, msg: string): Record<string, unknown> | undefined =>
    lines.find((l) => l['role'] === role && l['msg'] === msg)
  await expect
    .poll(() => find('primary', 'listening') ?? stderr.slice(0, 500), { timeout: 15_000 })
    .toMatchObject({ workers: 2 })
  const port = find('primary', 'listening')?.['port'] as number
  const adminPort = find('primary', 'admin listening')?.['port'] as number
  return {
    file,
    base: `http://127.0.0.1:${port}`,
    admin: `http://127.0.0.1:${adminPort}/metrics`,
    exited,
    lines,
    pid: child.pid ?? 0,
    signal: (sig) => void child.kill(sig),
  }
}

/**
 * Two workers, port 0 for both listeners, one server `app` (and more as `extra` servers), and
 * `adminToken` as admin.token when given.
 */
function workersConfig(
  upstream: string,
  extra: Record<string, unknown> = {},
  adminToken?: string,
): string {
  return stringify({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, ...(adminToken !== undefined && { token: adminToken }) },
    workers: 2,
    log: { level: 'info' },
    shutdown: { drainMs: 10_000 },
    servers: {
      app: {
        upstreams: [{ url: upstream }],
        healthCheck: { intervalMs: INTERVAL_MS, timeoutMs: 1000 },
      },
      ...extra,
    },
  })
}

/** One tools/call on a connection of its own, so the primary hands each to the next worker. */
async function call(base: string, id: number, name = 'work', server = 'app'): Promise<number> {
  const client = new Client(base)
  try {
    const res = await client.request({
      path: `/mcp/${server}`,
      method: 'POST',
      headers: mcpHeaders('tools/call', name),
      body: JSON.stringify(mcpBody('tools/call', { name }, id)),
    })
    await res.body.dump()
    return res.statusCode
  } finally {
    await client.close()
  }
}

/** The smallest gap between two consecutive probes. */
function minGap(times: readonly number[]): number {
  let min = Infinity
  for (let i = 1; i < times.length; i++) min = Math.min(min, (times[i] ?? 0) - (times[i - 1] ?? 0))
  return min
}

function workerPids(lines: readonly Record<string, unknown>[]): number[] {
  return lines.filter((l) => l['msg'] === 'worker listening').map((l) => l['pid'] as number)
}

beforeAll(() => {
  if (!existsSync('dist/cli.js')) throw new Error('dist/cli.js is missing: run npm run build')
})

describe('workers: 2 (mcp-edge serve as a cluster)', () => {
  it(
    'serves from both workers, sums their metrics, probes once per interval, restarts a killed worker',
    { timeout: 60_000 },
    async () => {
      const backend = await startBackend()
      const gw = await serveWorkers(backend.url)

      // Sequential calls on fresh connections: the primary deals them round-robin to both workers,
      // which reach the backend on one keep-alive connection each.
      for (let i = 1; i <= 10; i++) expect(await call(gw.base, i)).toBe(200)
      expect(new Set(backend.callPorts).size).toBe(2)

      // The admin /metrics (the primary's) sums both workers' counters.
      const text = await request(gw.admin).then((r) => r.body.text())
      const served = [
        ...text.matchAll(/^mcp_edge_requests_total\{[^}]*server="app"[^}]*\} (\d+)$/gm),
      ]
      expect(served.reduce((n, m) => n + Number(m[1]), 0)).toBe(10)
      // The status model sums the workers the same way; both report; the checker's results
      // reached both (the last health check); the data plane's /readyz says ready, no more.
      type Status = {
        gateway: { workers: { configured: number; reporting: number; pids: number[] } }
        servers: {
          name: string
          traffic: { '1m': { requests: number } }
          replicas: { lastCheck: unknown }[]
        }[]
      }
      const readStatus = async (): Promise<Status> =>
        (await request(gw.admin.replace('/metrics', '/status.json')).then((r) =>
          r.body.json(),
        )) as Status
      // The primary leaves out a worker that does not answer within its wait (cluster/status.ts);
      // a worker's first report, on a machine busy with other tests, can miss it once.
      let status = await readStatus()
      await expect
        .poll(async () => (status = await readStatus()).gateway.workers, { timeout: 15_000 })
        .toMatchObject({ configured: 2, reporting: 2 })
      expect(status.gateway.workers.pids.sort()).toEqual(workerPids(gw.lines).sort())
      const app = status.servers.find((x) => x.name === 'app')
      expect(app?.traffic['1m'].requests).toBe(10)
      const lastChecks = async (): Promise<unknown[]> => {
        const doc = (await request(gw.admin.replace('/metrics', '/status.json')).then((r) =>
          r.body.json(),
        )) as Status
        return doc.servers.flatMap((x) => x.replicas.map((r) => r.lastCheck))
      }
      await expect.poll(lastChecks).toEqual([expect.objectContaining({ ok: true })])
      await expect
        .poll(async () => {
          const r = await request(gw.admin.replace('/metrics', '/readyz'))
          return r.body.json()
        })
        .toMatchObject({ ready: true, workers: { configured: 2, reporting: 2 } })
      expect(await request(`${gw.base}/readyz`).then((r) => r.body.text())).toBe('{"ready":true}')

      // One checker: probes never come closer than the interval (two checkers would interleave).
      await expect.poll(() => backend.probes.length, { timeout: 15_000 }).toBeGreaterThanOrEqual(6)
      expect(minGap(backend.probes)).toBeGreaterThanOrEqual(INTERVAL_MS * 0.95)

      // Kill the checker (slot 0): the other worker serves on, the primary restarts it.
      const [checker] = gw.lines.filter((l) => l['msg'] === 'worker listening' && l['slot'] === 0)
      process.kill(checker?.['pid'] as number, 'SIGKILL')
      await expect
        .poll(() => gw.lines.find((l) => l['msg'] === 'worker exited'), { timeout: 15_000 })
        .toMatchObject({ slot: 0, signal: 'SIGKILL' })
      for (let i = 11; i <= 14; i++) expect(await call(gw.base, i)).toBe(200)
      await expect.poll(() => workerPids(gw.lines).length, { timeout: 15_000 }).toBe(3)
      const restarted = workerPids(gw.lines)[2]
      expect(restarted).not.toBe(checker?.['pid'])
      // The restarted worker is the checker again, still the only one.
      const before = backend.probes.length
      await expect
        .poll(() => backend.probes.length, { timeout: 15_000 })
        .toBeGreaterThanOrEqual(before + 4)
      expect(minGap(backend.probes.slice(before))).toBeGreaterThanOrEqual(INTERVAL_MS * 0.95)
      for (let i = 15; i <= 18; i++) expect(await call(gw.base, i)).toBe(200)

      gw.signal('SIGTERM')
      expect(await gw.exited).toBe(0)
    },
  )

  it(
    'a config edit reaches every worker; SIGTERM to the primary drains them all, exit 0',
    { timeout: 60_000 },
    async () => {
      const backend = await startBackend()
      const gw = await serveWorkers(backend.url)
      // A config edit and SIGHUP reach every worker: four calls in a row, dealt to both, find the
      // new server.
      expect(await call(gw.base, 1, 'work', 'added')).toBe(404)
      const added = { added: { upstreams: [{ url: backend.url }] } }
      await writeFile(gw.file, workersConfig(backend.url, added))
      gw.signal('SIGHUP')
      await expect
        .poll(
          async () => {
            const statuses: number[] = []
            for (let i = 0; i < 4; i++) statuses.push(await call(gw.base, 1, 'work', 'added'))
            return statuses
          },
          { timeout: 15_000 },
        )
        .toEqual([200, 200, 200, 200])
      const calls = [1, 2, 3, 4].map((id) => call(gw.base, id, 'slow'))
      await expect.poll(() => backend.inFlight).toBe(4)
      gw.signal('SIGTERM')
      expect(await Promise.all(calls)).toEqual([200, 200, 200, 200])
      expect(await gw.exited).toBe(0)
      expect(gw.lines.filter((l) => l['msg'] === 'draining')).toHaveLength(2)
      await expect(call(gw.base, 5)).rejects.toThrow() // nothing listens any more
    },
  )

  it(
    "a new admin.token reaches the primary's admin listener and ends every sign-in",
    { timeout: 60_000 },
    async () => {
      const [before, after] = ['admin-token-before-the-edit', 'admin-token-after-the-edit']
      const backend = await startBackend()
      const gw = await serveWorkers(backend.url, workersConfig(backend.url, {}, before))
      const admin = gw.admin.replace('/metrics', '')
      const signIn = await request(`${admin}/login`, {
        method: 'POST',
        headers: { origin: admin, 'content-type': 'application/x-www-form-urlencoded' },
        body: `token=${before}`,
      })
      await signIn.body.dump()
      expect(signIn.statusCode).toBe(303)
      const cookie = String(signIn.headers['set-cookie']).split(';')[0] ?? ''
      const status = async (headers: Record<string, string>): Promise<number> => {
        const res = await request(`${admin}/status.json`, { headers })
        await res.body.dump()
        return res.statusCode
      }
      expect(await status({ cookie })).toBe(200)
      await writeFile(gw.file, workersConfig(backend.url, {}, after))
      gw.signal('SIGHUP')
      await expect.poll(() => status({ cookie }), { timeout: 15_000 }).toBe(401)
      expect(await status({ authorization: `Bearer ${before}` })).toBe(401)
      expect(await status({ authorization: `Bearer ${after}` })).toBe(200)
      gw.signal('SIGTERM')
      expect(await gw.exited).toBe(0)
    },
  )
})

/** Where a worker's restart is when the primary gets SIGTERM. */
const RESTART_PHASES = ['worker exited', 'replacement forked', 'replacement listening'] as const
type RestartPhase = (typeof RESTART_PHASES)[number]

/** The processes `pid` has forked, from /proc (Linux): a worker is there from its fork on. */
function children(pid: number): number[] {
  const tasks = readdirSync(`/proc/${pid}/task`)
  return tasks.flatMap((t) =>
    readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
  )
}

/** Waits until the restart of the killed worker `victim` has reached `phase`. */
async function restartReached(gw: Served, victim: number, phase: RestartPhase): Promise<void> {
  const exited = (): boolean =>
    gw.lines.some((l) => l['msg'] === 'worker exited' && l['pid'] === victim)
  await expect.poll(exited, { timeout: 15_000 }).toBe(true)
  if (phase === 'worker exited') return
  // Forked: a second child again, not yet listening (it takes a few hundred ms to start).
  await expect.poll(() => children(gw.pid).length, { timeout: 15_000 }).toBe(2)
  if (phase === 'replacement forked') return
  await expect.poll(() => workerPids(gw.lines).length, { timeout: 15_000 }).toBe(3)
}

describe('workers: 2, drained during and after a restart', () => {
  it(
    'SIGTERM with a slow call in flight, a killed worker restarting or restarted: the call completes, exit 0, 8 runs',
    { timeout: 120_000 },
    async () => {
      const outcomes: { phase: string; status: number; code: number | null }[] = []
      for (let run = 0; run < 8; run++) {
        const phase = RESTART_PHASES[run % RESTART_PHASES.length] ?? 'worker exited'
        const backend = await startBackend(600)
        const gw = await serveWorkers(backend.url)
        const victim = workerPids(gw.lines)[run % 2] ?? 0
        process.kill(victim, 'SIGKILL')
        await restartReached(gw, victim, phase)
        // The call lands on a worker that listens (the survivor, or either once both do).
        const slow = call(gw.base, 1, 'slow')
        await expect.poll(() => backend.inFlight).toBe(1)
        gw.signal('SIGTERM')
        const status = await slow
        const code = await gw.exited
        outcomes.push({ phase, status, code })
        // The drain started no process: a restart due when the signal came was called off.
        const drainAt = gw.lines.findIndex((l) => l['msg'] === 'draining every worker')
        expect(gw.lines.slice(drainAt).filter((l) => l['msg'] === 'worker started')).toEqual([])
      }
      expect(outcomes).toEqual(outcomes.map(({ phase }) => ({ phase, status: 200, code: 0 })))
    },
  )
})
