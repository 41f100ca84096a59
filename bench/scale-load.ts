/**
 * The load and the gateways of `npm run bench:scale` (scale.ts): a closed loop of `connections` requests in
 * flight over one undici pool, each request's end time and latency kept, so that a window can be
 * cut anywhere afterwards (the p99 while a reload runs) and the gateway's CPU read from /proc at
 * the window's edges.
 */
import { readFileSync } from 'node:fs'
import { Pool } from 'undici'
import type { Child } from './children.js'
import { launchGateway, type Gateway } from './gateway.js'
import { cpuTicks, processTree } from './proc.js'

export interface LoadSpec {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly connections: number
  readonly warmupMs: number
  readonly durationMs: number
  /** Pids whose CPU the window is charged with (the gateway). */
  readonly pids: readonly number[]
  readonly clkTck: number
  /** Called once the warm-up is over, with the window's start (ms, performance.now()). */
  readonly onWindow?: (startMs: number) => void
  /**
   * Requests per second on a fixed schedule (an open loop), each latency counted from when it
   * was due, so a pause of the gateway shows in full; `connections` then caps those in flight.
   * Without it, `connections` requests are always in flight (a closed loop).
   */
  readonly rate?: number
}

export interface LoadResult {
  /** performance.now() at each answer's end, and its latency in ms, in completion order. */
  readonly ends: Float64Array
  readonly latencies: Float64Array
  readonly count: number
  readonly windowStartMs: number
  readonly windowEndMs: number
  /** Gateway CPU (user + system) per request answered in the window, µs. */
  readonly cpuUsPerRequest: number
  /** Answers per second in the window. */
  readonly rps: number
  readonly failures: number
}

/** Runs the load and resolves once every request in flight has answered. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const pool = new Pool(new URL(spec.url).origin, {
    connections: spec.connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
  })
  const path = new URL(spec.url).pathname
  const capacity = 1 << 20
  const ends = new Float64Array(capacity)
  const latencies = new Float64Array(capacity)
  let count = 0
  let failures = 0
  const start = performance.now()
  const windowStartMs = start + spec.warmupMs
  const stopAt = windowStartMs + spec.durationMs
  let ticksAtStart = Number.NaN
  let ticksAtEnd = Number.NaN
  let inWindowStart = -1
  let inWindowEnd = -1
  const startTimer = setTimeout(() => {
    ticksAtStart = cpuTicks(spec.pids)
    spec.onWindow?.(performance.now())
  }, spec.warmupMs)
  const endTimer = setTimeout(
    () => (ticksAtEnd = cpuTicks(spec.pids)),
    spec.warmupMs + spec.durationMs,
  )
  const send = async (due: number): Promise<void> => {
    try {
      const res = await pool.request({
        path,
        method: 'POST',
        headers: spec.headers,
        body: spec.body,
      })
      await res.body.dump()
      if (res.statusCode !== 200) failures++
    } catch {
      failures++
    }
    const t1 = performance.now()
    if (count < capacity) {
      ends[count] = t1
      latencies[count] = t1 - due
      if (inWindowStart < 0 && t1 >= windowStartMs) inWindowStart = count
      if (t1 <= stopAt) inWindowEnd = count
      count++
    }
  }
  if (spec.rate === undefined) {
    const one = async (): Promise<void> => {
      while (performance.now() < stopAt) await send(performance.now())
    }
    await Promise.all(Array.from({ length: spec.connections }, one))
  } else {
    const every = 1000 / spec.rate
    const sent: Promise<void>[] = []
    for (let due = start; due < stopAt;) {
      const now = performance.now()
      if (now < due) {
        await new Promise((resolve) => setTimeout(resolve, Math.max(1, due - now)))
        continue
      }
      // Everything due by now goes out at once: a late timer never thins the schedule.
      for (; due <= now && due < stopAt; due += every) sent.push(send(due))
    }
    await Promise.all(sent)
  }
  clearTimeout(startTimer)
  clearTimeout(endTimer)
  // On a busy machine a timer may not have fired before the load ended: the window then ends now.
  if (Number.isNaN(ticksAtEnd)) ticksAtEnd = cpuTicks(spec.pids)
  await pool.close()
  const answered = inWindowStart < 0 ? 0 : inWindowEnd - inWindowStart + 1
  const cpuUs = ((ticksAtEnd - ticksAtStart) * 1e6) / spec.clkTck
  return {
    ends,
    latencies,
    count,
    windowStartMs,
    windowEndMs: stopAt,
    cpuUsPerRequest: answered > 0 ? cpuUs / answered : Number.NaN,
    rps: (answered * 1000) / spec.durationMs,
    failures,
  }
}

/** The p-th percentile (0–100) of the latencies of the answers whose end `at` accepts. */
export function percentile(r: LoadResult, p: number, at: (endMs: number) => boolean): number {
  const xs: number[] = []
  for (let i = 0; i < r.count; i++) if (at(r.ends[i] as number)) xs.push(r.latencies[i] as number)
  if (xs.length === 0) return Number.NaN
  xs.sort((a, b) => a - b)
  return xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] as number
}

/** Resident memory of a process (VmRSS of /proc/<pid>/status), MB. */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN)
  return kb / 1024
}

/**
 * Resolves when `child` prints a line containing `marker`, with the time it was read
 * (performance.now()). Reads chunk by chunk, keeping only a line's worth between chunks: a
 * gateway's access log runs to megabytes under load.
 */
export function whenPrinted(child: Child, marker: string, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let carry = ''
    const onData = (chunk: Buffer): void => {
      const text = carry + chunk.toString('utf8')
      if (text.includes(marker)) return finish(() => resolve(performance.now()))
      carry = text.slice(-marker.length)
    }
    const timer = setTimeout(
      () => finish(() => reject(new Error(`${child.name}: no "${marker}" within ${timeoutMs} ms`))),
      timeoutMs,
    )
    const finish = (settle: () => void): void => {
      clearTimeout(timer)
      child.proc.stdout?.off('data', onData)
      settle()
    }
    child.proc.stdout?.on('data', onData)
  })
}

/** Median and least of a list of figures. */
export function spread(xs: readonly number[]): { median: number; least: number } {
  const s = [...xs].filter((x) => !Number.isNaN(x)).sort((a, b) => a - b)
  return { median: s[Math.floor(s.length / 2)] ?? Number.NaN, least: s[0] ?? Number.NaN }
}

/** Where the children run and what every phase shares. */
export interface Scale {
  readonly repoRoot: string
  readonly configDir: string
  readonly backend: string
  readonly clkTck: number
  readonly rounds: number
  readonly windowMs: number
  readonly warmupMs: number
  readonly gatewayCpu: number
}

/** A gateway of the bench, started with `config(port)`, its start time (spawn → /healthz). */
export async function timedGateway(
  s: Scale,
  name: string,
  config: (port: number) => Record<string, unknown>,
): Promise<{ gw: Gateway; startMs: number; pids: number[] }> {
  const t0 = performance.now()
  const gw = await launchGateway(
    { name, repoRoot: s.repoRoot, configDir: s.configDir, cpu: s.gatewayCpu },
    config,
  )
  return { gw, startMs: performance.now() - t0, pids: processTree(gw.child.pid) }
}

/** Stops a gateway and waits for it to be gone, so the next one has the core to itself. */
export async function stop(gw: Gateway): Promise<void> {
  gw.child.proc.kill('SIGTERM')
  await gw.child.exited
}

/** Loads `url` for a few seconds, measuring nothing: the JIT settles before the rounds. */
export async function warmUp(
  s: Scale,
  url: string,
  req: { readonly headers: Readonly<Record<string, string>>; readonly body: string },
  pids: readonly number[],
  connections = 16,
): Promise<void> {
  await runLoad({
    url,
    ...req,
    connections,
    warmupMs: 0,
    durationMs: s.windowMs > 1000 ? 3000 : 1000,
    pids,
    clkTck: s.clkTck,
  })
}
