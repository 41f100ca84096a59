/**
 * `npm run bench:profile`: a CPU profile of the gateway in its default config (`trustHeaders:
 * false`, access log on, cache on) under the bench's c=16 tools/call load, and the per-stage
 * breakdown of it, beside the floor proxy's under the same load (bench/README.md §Profile).
 * Layout as in run.ts.
 *
 * Env: BENCH_DURATION_S (default 10), BENCH_CONNECTIONS (16), BENCH_METHOD (tools/call),
 * BENCH_PROFILE_TARGET (gateway-verify, the default config; gateway, with `trustHeaders: true`;
 * gateway-virtual, the same call routed through a virtual server over it;
 * gateway-auth-policy, JWT and the 20-rule policy as in npm run bench; gateway-auth-condition, the
 * same with a condition on the rule that allows the call; gateway-nostore, the default config in
 * front of a backend whose lists are not cacheable, for an uncached list),
 * BENCH_PROFILE_DIR (default bench/results/profile). Prints the breakdown; the .cpuprofile stays in
 * the folder (open it in Chrome DevTools or speedscope).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runScript, stopAll } from './children.js'
import { startGateway } from './gateway.js'
import { startLoadWorker } from './load-client.js'
import { clockTicksPerSecond, processTree } from './proc.js'
import type { BenchMethod } from './requests.js'
import {
  authPolicyTargets,
  floorTargets,
  startBackend,
  type Backend,
  type Placement,
  type Target,
} from './targets.js'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

interface ProfileNode {
  readonly id: number
  readonly callFrame: {
    readonly functionName: string
    readonly url: string
    readonly lineNumber?: number
  }
}
interface CpuProfile {
  /** µs on the monotonic clock `process.hrtime` reads too (V8 TimeTicks on Linux). */
  readonly startTime: number
  readonly nodes: readonly ProfileNode[]
  readonly samples: readonly number[]
  readonly timeDeltas: readonly number[]
}

/** Where a sampled function's time is charged: the gateway's stages by file, the rest by owner. */
function category(url: string, fn: string): string {
  if (fn === '(garbage collector)') return 'GC'
  if (fn === '(idle)') return 'idle'
  if (fn === '(program)') return 'V8/native, unattributed'
  if (url.includes('@hono/node-server')) return '@hono/node-server adapter'
  if (url.includes('/hono/dist/')) return 'hono (router, compose, Context)'
  if (url.includes('/undici/') || url.startsWith('wasm:')) return 'undici (incl. llhttp wasm)'
  if (/\/(pino|sonic-boom|thread-stream)\//.test(url)) return 'pino'
  const own =
    /\/dist\/(?:(pipeline|upstream|mcp|policy|cache|auth|observability|telemetry)\/)?([\w-]+)\.js/.exec(
      url,
    )
  if (own !== null) {
    if (own[2] === 'node-response') return 'Node → hono listener (pipeline/node-response)'
    if (own[1] === 'pipeline') return `stage ${own[2] ?? ''}`
    if (own[1] === 'observability') return 'access log + metrics (observability/)'
    return `mcp-edge ${own[1] ?? own[2] ?? ''}`
  }
  if (/node:_http_(server|incoming|common)/.test(url)) return 'Node HTTP server (parser, request)'
  if (/node:_http_outgoing/.test(url)) return 'Node HTTP response (headers, write)'
  if (/node:net|stream_base_commons|internal\/streams|node:stream/.test(url))
    return 'Node net + streams (socket reads/writes)'
  if (
    /node:events|internal\/timers|node:timers|async_hooks|task_queues|process\/promises/.test(url)
  )
    return 'Node events, timers, promise hooks'
  if (/^(writev|writeString|writeBuffer|writeUtf8String|writeLatin1String)$/.test(fn))
    return 'socket writes (native writev/writeString)'
  if (fn === 'runMicrotasks') return 'microtask queue (native)'
  if (url.includes('internal/modules/')) return 'start-up (module loading)'
  if (url === '') return fn === '' ? 'V8/native, unattributed' : `native ${fn}`
  return url.startsWith('node:')
    ? `Node ${url.slice(5)}`
    : `other ${url.split('/').slice(-2).join('/')}`
}

/** The measured load's span, µs on the monotonic clock: samples outside it are start-up. */
interface Window {
  readonly fromUs: number
  readonly toUs: number
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

/**
 * Calls `fn(sampleIndex)` for each sample taken inside `window`: the profile also covers the
 * process's start, module loading and JIT warm-up, which /proc's per-request figure does not.
 */
function eachSample(profile: CpuProfile, window: Window, fn: (id: number, us: number) => void) {
  let t = profile.startTime
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0
    t += us
    if (t >= window.fromUs && t <= window.toUs) fn(id, us)
  })
}

/** Self time per category in µs, and the busy total (everything but idle). */
function breakdown(
  profile: CpuProfile,
  window: Window,
): { busyUs: number; rows: [string, number][] } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const totals = new Map<string, number>()
  let busyUs = 0
  eachSample(profile, window, (id, us) => {
    const node = byId.get(id)
    if (node === undefined) return
    const cat = category(node.callFrame.url, node.callFrame.functionName)
    if (cat === 'idle') return
    busyUs += us
    totals.set(cat, (totals.get(cat) ?? 0) + us)
  })
  return { busyUs, rows: [...totals].sort((a, b) => b[1] - a[1]) }
}

/** Self time per function (name, file, line), the largest first. */
function topFunctions(profile: CpuProfile, window: Window, count: number): [string, number][] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const totals = new Map<string, number>()
  eachSample(profile, window, (id, us) => {
    const f = byId.get(id)?.callFrame
    if (f === undefined || f.functionName === '(idle)') return
    const where = f.url.split('/').slice(-2).join('/')
    const key = `${f.functionName || '(anonymous)'} ${where}:${(f.lineNumber ?? 0) + 1}`
    totals.set(key, (totals.get(key) ?? 0) + us)
  })
  return [...totals].sort((a, b) => b[1] - a[1]).slice(0, count)
}

/**
 * The newest .cpuprofile in `dir` of process `pid`'s main thread: Node names them
 * CPU.<date>.<time>.<pid>.<thread>.<seq>, and a loader thread (tsx) writes one of its own.
 */
function profileOf(dir: string, pid: number): CpuProfile {
  const file = readdirSync(dir)
    .filter((f) => {
      const parts = f.split('.')
      return f.endsWith('.cpuprofile') && parts[3] === String(pid) && parts[4] === '0'
    })
    .map((f) => join(dir, f))
    .sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs)
    .at(-1)
  if (file === undefined) throw new Error(`process ${pid} wrote no .cpuprofile to ${dir}`)
  return JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
}

/** µs per request by category: a profile's shares of busy time times /proc CPU per request. */
function perRequest(profile: CpuProfile, window: Window, cpuUsPerReq: number): Map<string, number> {
  const { busyUs, rows } = breakdown(profile, window)
  return new Map(rows.map(([cat, us]) => [cat, (us / busyUs) * cpuUsPerReq]))
}

interface Profiled {
  readonly id: string
  readonly url: string
  readonly headers?: Target['headers'] | undefined
  readonly pid: number
}

/** The gateway BENCH_PROFILE_TARGET names, started with the profiler's flags (set before). */
async function profiledGateway(
  placement: Placement,
  backend: Backend,
  configDir: string,
): Promise<Profiled> {
  const id = process.env['BENCH_PROFILE_TARGET'] ?? 'gateway-verify'
  if (id === 'gateway-auth-policy' || id === 'gateway-auth-condition') {
    const [t] = await authPolicyTargets(placement, backend, id === 'gateway-auth-condition')
    const pid = t?.gatewayPids[0]
    if (t === undefined || pid === undefined) throw new Error(`${id} did not start`)
    return { id, url: t.url, headers: t.headers, pid }
  }
  const known = ['gateway', 'gateway-verify', 'gateway-virtual', 'gateway-nostore']
  if (!known.includes(id)) {
    throw new Error(
      `BENCH_PROFILE_TARGET=${id}: name ${known.join(', ')}, gateway-auth-policy or gateway-auth-condition`,
    )
  }
  const virtual = id === 'gateway-virtual'
  const path = virtual ? 'virtual' : id === 'gateway-nostore' ? 'nostore' : 'bench'
  const gw = await startGateway({
    name: `${id}-profile`,
    repoRoot,
    configDir,
    cpu: 0,
    servers: { bench: backend.url, nostore: backend.noStoreUrl },
    trustHeaders: id === 'gateway' || id === 'gateway-virtual',
    // The routed call through a virtual server over `bench`, as the bench's gateway-virtual row.
    ...(virtual && { extra: { virtualServers: { virtual: { members: ['bench'] } } } }),
  })
  return { id, url: `${gw.baseUrl}/mcp/${path}`, pid: gw.child.pid }
}

async function main(): Promise<void> {
  const durationS = Number(process.env['BENCH_DURATION_S'] ?? 10)
  const connections = Number(process.env['BENCH_CONNECTIONS'] ?? 16)
  const method = (process.env['BENCH_METHOD'] ?? 'tools/call') as BenchMethod
  const dir = process.env['BENCH_PROFILE_DIR'] ?? join(repoRoot, 'bench', 'results', 'profile')
  mkdirSync(dir, { recursive: true })
  const configDir = mkdtempSync(join(tmpdir(), 'mcp-edge-profile-'))
  process.on('exit', () => rmSync(configDir, { recursive: true, force: true }))
  const placement = { repoRoot, configDir, gatewayCpu: 0, backendCpu: 1 }
  const backend = await startBackend(placement)
  const worker = await startLoadWorker(repoRoot, 1)
  const flags = ['--cpu-prof', `--cpu-prof-dir=${dir}`]
  process.env['BENCH_GATEWAY_FLAGS'] = flags.join(' ')
  const load = async (url: string, pids: readonly number[], headers?: Target['headers']) => {
    const spec = {
      url,
      headers,
      method,
      connections,
      warmupS: 2,
      durationS,
      clkTck: clockTicksPerSecond(),
      gatewayPids: pids,
      backendPids: backend.pids,
      backendStatsUrl: backend.statsUrl,
    }
    await worker.run({ ...spec, durationS: 2 }) // JIT warm-up, outside the profile's window
    const fromUs = nowUs()
    const m = await worker.run(spec)
    return { m, window: { fromUs, toUs: nowUs() } }
  }
  // The floor proxy first, profiled the same way: what the gateway costs above it is its own.
  const floor = (await floorTargets(placement, backend, flags)).find((t) => t.method === method)
  if (floor === undefined) throw new Error(`no floor target for ${method}`)
  const { m: floorM, window: floorWindow } = await load(floor.url, floor.gatewayPids)
  const gw = await profiledGateway(placement, backend, configDir)
  const { m, window } = await load(gw.url, processTree(gw.pid), gw.headers)
  await stopAll(20_000) // SIGTERM: the gateway drains and exits, writing its profile
  const profile = profileOf(dir, gw.pid)
  const { busyUs, rows } = breakdown(profile, window)
  if (busyUs === 0) throw new Error('no profile sample inside the measured window')
  // Shares are read from the samples of the measured window only, µs per request from the same
  // window's /proc CPU (as in npm run bench).
  const perReq = m.gatewayCpuUsPerReq ?? NaN
  const floorPerReq = floorM.gatewayCpuUsPerReq ?? NaN
  const floorBy = perRequest(profileOf(dir, floor.gatewayPids[0] ?? -1), floorWindow, floorPerReq)
  const gatewayBy = perRequest(profile, window, perReq)
  const us = (v: number | undefined): string => (v === undefined ? '–' : v.toFixed(1))
  const lines = [
    `# ${gw.id} CPU profile: ${method}, c=${connections}, ${durationS} s`,
    '',
    `- ${m.requests} requests in the window, ${m.rps.toFixed(0)} req/s, gateway ${perReq.toFixed(0)} µs/request (/proc)`,
    `- the floor proxy under the same load: ${floorM.rps.toFixed(0)} req/s, ${floorPerReq.toFixed(0)} µs/request`,
    `- profile: ${join(dir, `*.${gw.pid}.*.cpuprofile`)}`,
    '',
    '| where | share of busy CPU | ≈ µs/request | floor ≈ µs/request | gateway − floor |',
    '|---|---:|---:|---:|---:|',
    ...rows
      .filter(([, t]) => t / busyUs >= 0.003)
      .map(([cat, t]) => {
        const g = gatewayBy.get(cat)
        const f = floorBy.get(cat)
        return `| ${cat} | ${((100 * t) / busyUs).toFixed(1)} % | ${us(g)} | ${us(f)} | ${us((g ?? 0) - (f ?? 0))} |`
      }),
    `| total (/proc) | 100 % | ${us(perReq)} | ${us(floorPerReq)} | ${us(perReq - floorPerReq)} |`,
    '',
    'Largest single functions (self time):',
    '',
    ...topFunctions(profile, window, 25).map(
      ([name, t]) => `- ${((100 * t) / busyUs).toFixed(1)} % \`${name}\``,
    ),
    '',
  ]
  process.stdout.write(lines.join('\n'))
}

runScript('bench:profile', main)
