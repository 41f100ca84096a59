/**
 * `npm run bench`: the gateway next to a direct connection to the same backend, cell by cell.
 *
 * Layout on a 2-core machine (as in docs/design/hot-path.md): gateway on CPU 0; backend
 * and the niced load generator on CPU 1. For each method and concurrency the targets run back to
 * back, so every ratio compares cells measured seconds apart under the same machine noise.
 *
 * Env: BENCH_QUICK=1 (1 s cells, smoke test), BENCH_DURATION_S=<s>, BENCH_WARMUP_S=<s>,
 * BENCH_DIRECT_ONLY=1 (no gateway, e.g. before dist/cli.js exists), BENCH_TARGETS=<ids> (only
 * those rows, e.g. direct,floor,gateway,gateway-verify,gateway-virtual,gateway-auth-policy,
 * cache-hit-policy, cache-hit-curated).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { checkTarget } from './check.js'
import { hasTaskset, killAllNow, stopAll } from './children.js'
import { gatewayEntry } from './gateway.js'
import { startLoadWorker, type LoadWorker } from './load-client.js'
import { clockTicksPerSecond, hasProcStat } from './proc.js'
import { buildReport, renderMarkdown, writeReport, TARGET_LABELS, type Cell } from './report.js'
import type { BenchMethod } from './requests.js'
import {
  directTargets,
  gatewayTargets,
  startBackend,
  type Backend,
  type Target,
} from './targets.js'

const GATEWAY_CPU = 0
const BACKEND_CPU = 1
const METHODS: readonly BenchMethod[] = ['tools/call', 'tools/list']
const CONCURRENCY = [1, 16, 64] as const
const repoRoot = fileURLToPath(new URL('..', import.meta.url))

interface Settings {
  readonly durationS: number
  readonly warmupS: number
  readonly isQuick: boolean
  readonly isDirectOnly: boolean
}

async function main(): Promise<number> {
  const settings = readSettings()
  if (!hasProcStat()) throw new Error('this bench needs Linux /proc/<pid>/stat for CPU accounting')
  const configDir = mkdtempSync(join(tmpdir(), 'mcp-edge-bench-'))
  cleanups.push(() => rmSync(configDir, { recursive: true, force: true }))
  const placement = { repoRoot, configDir, gatewayCpu: GATEWAY_CPU, backendCpu: BACKEND_CPU }
  const backend = await startBackend(placement)
  const worker = await startLoadWorker(repoRoot, BACKEND_CPU)
  const plan = settings.isDirectOnly
    ? directTargets(backend)
    : await gatewayTargets(placement, backend)
  const { skipped, cacheState } = plan
  // BENCH_TARGETS=direct,gateway-virtual,… measures only those rows (tools/call and tools/list).
  const only = process.env['BENCH_TARGETS']?.split(',').filter((x) => x !== '')
  const targets =
    only === undefined ? plan.targets : plan.targets.filter((t) => only.includes(t.id))
  for (const t of targets) await checkTarget(TARGET_LABELS[t.id], t.url, t.method, t.headers)
  log(`checks passed for ${targets.length} targets; ${estimate(settings, targets.length)}`)

  const cells = await runCells(settings, worker, backend, targets)
  const report = buildReport(metadata(settings, cacheState), [...cells, ...skipped])
  const markdown = renderMarkdown(report)
  process.stdout.write(markdown)
  // BENCH_RESULTS_DIR: somewhere else than bench/results (runs side by side on one machine).
  const out = process.env['BENCH_RESULTS_DIR'] || join(repoRoot, 'bench', 'results')
  await writeReport(out, report, markdown)
  log(`wrote ${out}/latest.md and latest.json`)

  const failing = cells.filter((c) => (c.measured?.non2xx ?? 0) + (c.measured?.errors ?? 0) > 0)
  if (failing.length === 0) return 0
  log(
    `FAILED: ${failing.length} cell(s) saw non-2xx answers or errors; their figures are not valid`,
  )
  return 1
}

function readSettings(): Settings {
  const isQuick = process.env['BENCH_QUICK'] === '1'
  const durationS = seconds('BENCH_DURATION_S', isQuick ? 1 : 5)
  const warmupS = seconds('BENCH_WARMUP_S', isQuick ? 0.5 : 1)
  return { durationS, warmupS, isQuick, isDirectOnly: process.env['BENCH_DIRECT_ONLY'] === '1' }
}

function seconds(name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!(value > 0 && value <= 60))
    throw new Error(`${name} must be a number of seconds in (0, 60], got ${raw}`)
  return value
}

async function runCells(
  settings: Settings,
  worker: LoadWorker,
  backend: Backend,
  targets: readonly Target[],
): Promise<Cell[]> {
  const clkTck = clockTicksPerSecond()
  const spec = (t: Target, connections: number, durationS: number) => ({
    url: t.url,
    method: t.method,
    connections,
    warmupS: settings.warmupS,
    durationS,
    clkTck,
    gatewayPids: t.gatewayPids,
    backendPids: backend.pids,
    backendStatsUrl: backend.statsUrl,
    headers: t.headers,
  })
  // Unmeasured: lets every process JIT its hot path and fill its pools before the first c=1 cell.
  for (const t of targets) await worker.run(spec(t, 16, settings.warmupS))
  log('pre-warm done')
  const plan = METHODS.flatMap((method) =>
    CONCURRENCY.flatMap((connections) =>
      targets.filter((t) => t.method === method).map((t) => ({ ...t, connections })),
    ),
  )
  const cells: Cell[] = []
  for (const [i, t] of plan.entries()) {
    const measured = await worker.run(spec(t, t.connections, settings.durationS))
    const cell: Cell = { method: t.method, target: t.id, connections: t.connections, measured }
    cells.push(screenCacheHit(cell))
    const gw =
      measured.gatewayCpuUsPerReq === null
        ? ''
        : `, gateway ${measured.gatewayCpuUsPerReq.toFixed(0)} µs/req`
    log(
      `[${i + 1}/${plan.length}] ${t.method} c=${t.connections} ${TARGET_LABELS[t.id]}: ` +
        `${measured.rps.toFixed(0)} req/s${gw}`,
    )
  }
  return cells
}

/** A "cache hit" row only counts if the backend really was left alone during it. */
function screenCacheHit(cell: Cell): Cell {
  const hits = cell.measured?.backendPerResponse ?? 0
  if (cell.target === 'gateway' && cell.method === 'tools/list' && hits < 0.99) {
    log(
      'warning: the gateway served a no-store tools/list without the backend ' +
        `(${hits.toFixed(2)} hits/req)`,
    )
  }
  const isHit =
    cell.target === 'cache-hit' ||
    cell.target === 'cache-hit-policy' ||
    cell.target === 'cache-hit-curated'
  if (!isHit || hits <= 0.01) return cell
  const { measured: _dropped, ...rest } = cell
  return { ...rest, skipped: `cache: not active (backend ${hits.toFixed(2)} hits/req)` }
}

function metadata(
  settings: Settings,
  cacheState: string,
): Record<string, string | number | boolean> {
  const require = createRequire(import.meta.url)
  const { version } = require('autocannon/package.json') as { version: string }
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    clkTck: clockTicksPerSecond(),
    mode: settings.isQuick ? 'quick (smoke test; CPU figures are coarse)' : 'full',
    windowS: settings.durationS,
    warmupS: settings.warmupS,
    loadGenerator: `autocannon ${version} (programmatic, separate process)`,
    pinning: hasTaskset
      ? `gateway CPU ${GATEWAY_CPU}; backend + load (nice 10) CPU ${BACKEND_CPU}`
      : 'none (no taskset)',
    gateway: settings.isDirectOnly
      ? 'not run (BENCH_DIRECT_ONLY=1)'
      : `node ${gatewayEntry(repoRoot)} serve`,
    listCache: cacheState,
  }
}

function estimate(settings: Settings, targetCount: number): string {
  const cells = targetCount * CONCURRENCY.length
  const prewarm = targetCount * 2 * settings.warmupS
  const total = prewarm + cells * (settings.warmupS + settings.durationS + 0.3)
  return `${cells} cells, about ${Math.ceil(total)} s`
}

function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`)
}

// Cleanup: children are stopped on every way out; exit-time SIGKILL is the last resort.
const cleanups: (() => void)[] = []
let isShuttingDown = false

/** The first caller's exit code wins; a failure caused by the shutdown itself is ignored. */
async function shutdown(code: number): Promise<void> {
  if (isShuttingDown) return
  isShuttingDown = true
  await stopAll()
  for (const cleanup of cleanups) cleanup()
  process.exit(code)
}

/** A second Ctrl-C does not wait for the graceful stop. */
function onSignal(code: number): void {
  if (isShuttingDown) process.exit(code)
  void shutdown(code)
}

process.on('exit', killAllNow)
process.on('SIGINT', () => onSignal(130))
process.on('SIGTERM', () => onSignal(143))
main().then(
  (code) => shutdown(code),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? err.message : String(err)}`)
    return shutdown(1)
  },
)
