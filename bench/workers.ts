/**
 * Workers bench (bench/README.md "workers"): tools/call throughput of one gateway with
 * `workers: 1` (pinned to CPU 0) and with `workers: 2` (CPUs 0 and 1), same backend and load.
 * On a 2-core machine the backend and the load generator share CPU 1 with the second worker, so
 * the figure is what two workers win when the rest of the path also needs a core.
 * Run: `npm run build && node --import tsx bench/workers.ts`.
 */
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { killAllNow, stopAll } from './children.js'
import { startGateway } from './gateway.js'
import { startLoadWorker } from './load-client.js'
import { clockTicksPerSecond, processTree } from './proc.js'
import { startBackend } from './targets.js'

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..')
const durationS = Number(process.env['BENCH_DURATION_S'] ?? 5)
const warmupS = Number(process.env['BENCH_WARMUP_S'] ?? 1)
const CONNECTIONS = [16, 64] as const

async function main(): Promise<void> {
  const configDir = await mkdtemp(join(tmpdir(), 'mcp-edge-bench-workers-'))
  const placement = { repoRoot, configDir, gatewayCpu: 0, backendCpu: 1 }
  const backend = await startBackend(placement)
  const load = await startLoadWorker(repoRoot, 1)
  const rows: string[] = []
  for (const workers of [1, 2]) {
    const gw = await startGateway({
      repoRoot,
      configDir,
      name: `gateway-workers-${workers}`,
      servers: { bench: backend.url },
      trustHeaders: true,
      cpu: workers === 1 ? 0 : '0,1',
      extra: { workers, log: { level: 'warn' } },
    })
    // The primary answers nothing itself: wait until every worker is running.
    let pids = processTree(gw.child.pid)
    for (let i = 0; i < 100 && pids.length < workers + (workers > 1 ? 1 : 0); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      pids = processTree(gw.child.pid)
    }
    for (const connections of CONNECTIONS) {
      const m = await load.run({
        url: `${gw.baseUrl}/mcp/bench`,
        method: 'tools/call',
        connections,
        warmupS,
        durationS,
        clkTck: clockTicksPerSecond(),
        gatewayPids: pids,
        backendPids: backend.pids,
        backendStatsUrl: backend.statsUrl,
      })
      if (m.non2xx > 0 || m.errors > 0) throw new Error(`${m.non2xx} non-2xx, ${m.errors} errors`)
      const cpu = m.gatewayCpuUsPerReq === null ? '-' : m.gatewayCpuUsPerReq.toFixed(0)
      rows.push(
        `| ${workers} | ${connections} | ${m.rps.toFixed(0)} | ${m.p50Ms.toFixed(1)} | ${m.p99Ms.toFixed(1)} | ${cpu} | ${m.clientCpuPct.toFixed(0)} |`,
      )
      process.stderr.write(`${rows.at(-1) ?? ''}\n`)
    }
    gw.child.proc.kill('SIGTERM')
    await gw.child.exited
  }
  process.stdout.write(
    [
      '| workers | connections | req/s | p50 ms | p99 ms | gateway µs/req | client CPU % |',
      '|---|---|---|---|---|---|---|',
      ...rows,
    ].join('\n') + '\n',
  )
  await stopAll()
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench/workers: ${(err as Error).stack ?? String(err)}\n`)
    killAllNow()
    process.exit(1)
  },
)
