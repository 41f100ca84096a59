/**
 * `npm run bench:profile`: a CPU profile of the gateway in its default config (`trustHeaders:
 * false`, access log on, cache on) under the bench's c=16 tools/call load, and the per-stage
 * breakdown of it (bench/README.md §Profile). Layout as in run.ts.
 *
 * Env: BENCH_DURATION_S (default 10), BENCH_CONNECTIONS (16), BENCH_METHOD (tools/call),
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
import { startBackend } from './targets.js'

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

/** Self time per category in µs, and the busy total (everything but idle). */
function breakdown(profile: CpuProfile): { busyUs: number; rows: [string, number][] } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const totals = new Map<string, number>()
  let busyUs = 0
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)
    if (node === undefined) return
    const cat = category(node.callFrame.url, node.callFrame.functionName)
    const us = profile.timeDeltas[i] ?? 0
    if (cat === 'idle') return
    busyUs += us
    totals.set(cat, (totals.get(cat) ?? 0) + us)
  })
  return { busyUs, rows: [...totals].sort((a, b) => b[1] - a[1]) }
}

/** Self time per function (name, file, line), the largest first. */
function topFunctions(profile: CpuProfile, count: number): [string, number][] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const totals = new Map<string, number>()
  profile.samples.forEach((id, i) => {
    const f = byId.get(id)?.callFrame
    if (f === undefined || f.functionName === '(idle)') return
    const where = f.url.split('/').slice(-2).join('/')
    const key = `${f.functionName || '(anonymous)'} ${where}:${(f.lineNumber ?? 0) + 1}`
    totals.set(key, (totals.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0))
  })
  return [...totals].sort((a, b) => b[1] - a[1]).slice(0, count)
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
  process.env['BENCH_GATEWAY_FLAGS'] = `--cpu-prof --cpu-prof-dir=${dir}`
  const before = new Set(readdirSync(dir))
  const gw = await startGateway({
    name: 'gateway-profile',
    repoRoot,
    configDir,
    cpu: 0,
    servers: { bench: backend.url },
    trustHeaders: false,
  })
  const spec = {
    url: `${gw.baseUrl}/mcp/bench`,
    method,
    connections,
    warmupS: 2,
    durationS,
    clkTck: clockTicksPerSecond(),
    gatewayPids: processTree(gw.child.pid),
    backendPids: backend.pids,
    backendStatsUrl: backend.statsUrl,
  }
  await worker.run({ ...spec, durationS: 2 }) // JIT warm-up, inside the profile but small
  const m = await worker.run(spec)
  await stopAll(20_000) // SIGTERM: the gateway drains and exits, writing its profile
  const file = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile') && !before.has(f))
    .map((f) => join(dir, f))
    .sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs)
    .at(-1)
  if (file === undefined) throw new Error(`no .cpuprofile was written to ${dir}`)
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const { busyUs, rows } = breakdown(profile)
  // The profile covers warm-up and start-up too: shares are read from it, µs per request from the
  // measured window's /proc CPU (as in npm run bench).
  const perReq = m.gatewayCpuUsPerReq ?? NaN
  const lines = [
    `# gateway CPU profile: ${method}, c=${connections}, ${durationS} s`,
    '',
    `- ${m.requests} requests in the window, ${m.rps.toFixed(0)} req/s, gateway ${perReq.toFixed(0)} µs/request (/proc)`,
    `- profile: ${file}`,
    '',
    '| where | share of busy CPU | ≈ µs/request |',
    '|---|---:|---:|',
    ...rows
      .filter(([, us]) => us / busyUs >= 0.003)
      .map(
        ([cat, us]) =>
          `| ${cat} | ${((100 * us) / busyUs).toFixed(1)} % | ${((us / busyUs) * perReq).toFixed(1)} |`,
      ),
    '',
    'Largest single functions (self time):',
    '',
    ...topFunctions(profile, 25).map(
      ([name, us]) => `- ${((100 * us) / busyUs).toFixed(1)} % \`${name}\``,
    ),
    '',
  ]
  process.stdout.write(lines.join('\n'))
}

runScript('bench:profile', main)
