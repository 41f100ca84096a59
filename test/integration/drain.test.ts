import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Pool, request } from 'undici'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { stringify } from 'yaml'
import { mcpBody, mcpHeaders, mcpPost } from '../helpers/clients.js'
import { startTestGateway } from '../helpers/gateway.js'
import { poolConfig, startReplica, waitUntil } from '../helpers/replicas.js'
import { startSdkServer } from '../helpers/sdk-servers.js'
import { LISTEN_ACK as ACK, openListen } from '../helpers/streams.js'

interface ServedGateway {
  readonly child: ChildProcess
  readonly base: string
  readonly exited: Promise<number | null>
  stderr(): string
}

/**
 * Runs `mcp-edge serve` (src/cli.ts through tsx, so no build is needed) and waits for /healthz.
 * The log goes to a buffered stdout, so the port is chosen here: a random one, and another if a
 * parallel test process took it first (the child then exits with EADDRINUSE).
 */
async function serveGateway(config: Record<string, unknown>): Promise<ServedGateway> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-drain-'))
  const file = join(dir, 'gateway.yaml')
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000)
    const text = stringify({
      listen: { host: '127.0.0.1', port },
      log: { level: 'warn' },
      shutdown: { drainMs: 10_000 },
      ...config,
    })
    await writeFile(file, text)
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', 'serve', '--config', file],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    )
    let stderr = ''
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    let done = false
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => {
        done = true
        resolve(code)
      }),
    )
    onTestFinished(() => void child.kill('SIGKILL'))
    const base = `http://127.0.0.1:${port}`
    // Up when /healthz answers 200; false once the child has exited (a port taken meanwhile).
    const up = await vi
      .waitFor(
        async () => {
          if (done) return false
          const ok = await request(`${base}/healthz`).then(
            (res) => res.body.dump().then(() => res.statusCode === 200),
            () => false,
          )
          if (!ok) throw new Error('not listening yet')
          return true
        },
        { timeout: 20_000, interval: 50 },
      )
      .catch(() => false)
    if (up) return { child, base, exited, stderr: () => stderr }
    if (!stderr.includes('EADDRINUSE')) throw new Error(`gateway did not start: ${stderr}`)
  }
  throw new Error('no free port found')
}

describe('graceful drain (in process)', () => {
  it('finishes in-flight calls, ends listen streams cleanly, refuses new work, and returns early', async () => {
    const backend = await startSdkServer()
    onTestFinished(() => backend.close())
    const gw = await startTestGateway(
      { shutdown: { drainMs: 8000 }, ...poolConfig([backend]) },
      { autoClose: false },
    )
    const url = gw.mcpUrl('app')
    const listen = await openListen(url, 'listen:0')
    expect(listen.status).toBe(200)
    await waitUntil(() => listen.text().includes('acknowledged'), 5000, 'listen ack')
    const calls = [1, 2, 3].map((id) =>
      mcpPost(
        url,
        'tools/call',
        { name: 'slow_forecast', arguments: { city: 'Oslo', steps: 4 } },
        { id },
      ),
    )
    await waitUntil(() => backend.calls('tools/call').length === 3, 5000, 'calls in flight')
    const t0 = performance.now()
    const closing = gw.close()
    const ready = await request(`${gw.url}/readyz`).catch(() => undefined)
    if (ready !== undefined) expect(ready.statusCode).toBe(503) // only if a kept-alive socket let it in
    await ready?.body.dump()
    // The listen stream ends at an event boundary without a gateway error event.
    expect(await listen.ended).toBe('end')
    expect(listen.text()).toMatch(/acknowledged[^\n]*\n\n$/)
    expect(listen.text()).not.toContain('"error"')
    for (const res of await Promise.all(calls)) {
      expect(res.status).toBe(200)
      expect(res.response().result).toMatchObject({ content: [{ type: 'text' }] })
    }
    await closing
    // Returned once the work was done, not at the 8 s deadline: the listen stream was ended.
    expect(performance.now() - t0).toBeLessThan(4000)
    await expect(mcpPost(url, 'tools/list')).rejects.toThrow() // nothing listens any more
  })

  it('ends a stream after its last complete event, never in the middle of one', async () => {
    const half = 'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_ch'
    const r = await startReplica('r0', (c) =>
      c.method === 'subscriptions/listen' ? { sse: [ACK, half], end: false } : 'ok',
    )
    const gw = await startTestGateway(
      { shutdown: { drainMs: 8000 }, ...poolConfig([r]) },
      { autoClose: false },
    )
    const listen = await openListen(gw.mcpUrl('app'), 'listen:1')
    expect(listen.status).toBe(200)
    await waitUntil(() => listen.text() === ACK, 5000, 'ack')
    await new Promise((res) => setTimeout(res, 50)) // the half event has reached the gateway
    const t0 = performance.now()
    await gw.close()
    expect(performance.now() - t0).toBeLessThan(2000)
    expect(await listen.ended).toBe('end')
    expect(listen.text()).toBe(ACK)
  })
})

/** The nice value of each thread of process `pid` (proc(5): field 19 of /proc/PID/task/TID/stat). */
async function niceByThread(pid: number): Promise<Map<number, number>> {
  const tasks = await readdir(`/proc/${pid}/task`)
  const nice = new Map<number, number>()
  for (const tid of tasks) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => undefined)
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    if (stat !== undefined)
      nice.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]))
  }
  return nice
}

describe.runIf(process.platform === 'linux')('mcp-edge serve and its threads', () => {
  it('serves on a thread at its own priority and runs every other thread ten below it', async () => {
    const r = await startReplica('r0')
    const { child, base } = await serveGateway(poolConfig([r]))
    const res = await mcpPost(`${base}/mcp/app`, 'tools/call', { name: 'work' })
    expect(res.status).toBe(200)
    const nice = await niceByThread(child.pid as number)
    const serving = nice.get(child.pid as number) as number
    const others = [...nice].filter(([tid]) => tid !== child.pid).map(([, n]) => n)
    // V8's platform threads and libuv's pool at least (yielding.ts).
    expect(others.length).toBeGreaterThanOrEqual(4)
    expect(others.every((n) => n === Math.min(19, serving + 10))).toBe(true)
  })
})

describe('graceful drain (mcp-edge serve + SIGTERM)', () => {
  it('loses no accepted request under load, ends listen streams, and exits 0', async () => {
    const r = await startReplica('r0', (c) =>
      c.method === 'subscriptions/listen'
        ? { sse: [ACK, ': keepalive\n\n'], intervalMs: 100, end: false }
        : { delayMs: 150 },
    )
    const { child, base, exited, stderr } = await serveGateway(poolConfig([r]))
    const url = `${base}/mcp/app`
    const listen = await openListen(url, 'listen:2')
    expect(listen.status).toBe(200)
    await waitUntil(() => listen.text().includes('acknowledged'), 5000, 'listen ack')

    const pool = new Pool(base, { connections: 8 })
    onTestFinished(() => pool.destroy())
    const outcomes: { id: number; status: number | string }[] = []
    let id = 0
    let stop = false
    const worker = async (): Promise<void> => {
      while (!stop) {
        const n = id++
        const body = JSON.stringify(mcpBody('tools/call', { name: 'work' }, n))
        try {
          const res = await pool.request({
            path: '/mcp/app',
            method: 'POST',
            headers: mcpHeaders('tools/call', 'work'),
            body,
          })
          const text = await res.body.text()
          outcomes.push({
            id: n,
            status:
              res.statusCode === 503 && text.includes('shutting_down') ? 'refused' : res.statusCode,
          })
        } catch (err) {
          outcomes.push({ id: n, status: (err as { code?: string }).code ?? 'error' })
          await new Promise((res) => setTimeout(res, 10))
        }
      }
    }
    const workers = Array.from({ length: 8 }, worker)
    await waitUntil(() => outcomes.length >= 40, 15_000, 'load')
    await waitUntil(() => r.inFlight >= 4, 5000, 'calls in flight at the replica')
    const inFlightAtSignal = r.inFlight
    const signalled = performance.now()
    child.kill('SIGTERM')
    const code = await exited
    const exitMs = performance.now() - signalled
    stop = true
    await Promise.all(workers)

    expect(code, stderr()).toBe(0)
    expect(exitMs).toBeLessThan(5000) // the open listen stream did not hold the drain to its 10 s deadline
    expect(await listen.ended).toBe('end')
    expect(listen.text().endsWith('\n\n')).toBe(true)
    // Every request the backend received was answered to the client: nothing accepted was lost.
    const accepted = new Set(
      r.calls.filter((c) => c.method === 'tools/call').map((c) => Number(c.id)),
    )
    const byId = new Map(outcomes.map((o) => [o.id, o.status]))
    for (const n of accepted) expect(byId.get(n), `request ${n}`).toBe(200)
    expect(inFlightAtSignal).toBeGreaterThanOrEqual(4)
    // Everything else was refused before it was accepted: a 503 shutting_down or no connection.
    for (const o of outcomes) if (o.status !== 200) expect(accepted.has(o.id)).toBe(false)
    expect(outcomes.filter((o) => o.status === 200).length).toBeGreaterThanOrEqual(40)
  }, 45_000)
})
