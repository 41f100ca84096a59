/**
 * `npm run bench:system`: the system view. Agent sessions (`server/discover`, `tools/list`, three
 * `tools/call`; session-load.ts) at c=8 against the official-SDK demo servers `npm start` runs,
 * once straight at demo-weather and once through the gateway with the demo's own config
 * (deploy/gateway.demo.yaml: its policy folder, its cache). The figure: backend + gateway CPU per
 * session through the gateway ÷ backend CPU per session direct (target ≤ 0.8: the edge cache
 * takes discover and list off the backend), and sessions per second.
 *
 * Layout as in run.ts: gateway on CPU 0, the demo servers and the niced load on CPU 1. The two
 * phases alternate BENCH_REPEAT times (default 3); medians are reported.
 * Env: BENCH_DURATION_S (default 8), BENCH_WARMUP_S (default 2), BENCH_REPEAT, BENCH_CONCURRENCY (8).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { runScript, spawnNode, waitForLine } from './children.js'
import { launchGateway } from './gateway.js'
import { clockTicksPerSecond, processTree } from './proc.js'
import type { SessionResult, SessionSpec } from './session-load.js'

const GATEWAY_CPU = 0
const BACKEND_CPU = 1
const repoRoot = fileURLToPath(new URL('..', import.meta.url))

interface Phase {
  readonly name: 'direct' | 'gateway'
  readonly url: string
  readonly gatewayPids: readonly number[]
}

async function main(): Promise<number> {
  const durationS = Number(process.env['BENCH_DURATION_S'] ?? 8)
  const warmupS = Number(process.env['BENCH_WARMUP_S'] ?? 2)
  const repeat = Number(process.env['BENCH_REPEAT'] ?? 3)
  const concurrency = Number(process.env['BENCH_CONCURRENCY'] ?? 8)
  const configDir = mkdtempSync(join(tmpdir(), 'mcp-edge-system-'))
  process.on('exit', () => rmSync(configDir, { recursive: true, force: true }))

  const demo = spawnNode(
    'demo servers',
    ['--import', 'tsx', 'bench/demo-backends.ts', '--lifeline'],
    {
      cpu: BACKEND_CPU,
      cwd: repoRoot,
    },
  )
  const ports = await waitForLine(demo, /listening (\d+) (\d+)/, 30_000)
  const weather = `http://127.0.0.1:${ports[1] ?? ''}/mcp`
  const docs = `http://127.0.0.1:${ports[2] ?? ''}/mcp`
  const backendPids = processTree(demo.pid)

  // The demo's own config, with the ports of this run and the repository's policy folder.
  const demoConfig = parse(
    readFileSync(join(repoRoot, 'deploy', 'gateway.demo.yaml'), 'utf8'),
  ) as Record<string, unknown> & { servers: Record<string, { upstreams: { url: string }[] }> }
  const policies = join(configDir, 'policies')
  await mkdir(policies, { recursive: true })
  await writeFile(
    join(policies, 'default.yaml'),
    readFileSync(join(repoRoot, 'policies', 'default.yaml')),
  )
  // The demo's lock is named relative to deploy/; the copied config lives elsewhere.
  const pinning = demoConfig.pinning as { lockFile?: string } | undefined
  const lockFile = join(repoRoot, 'deploy', pinning?.lockFile ?? 'catalog.lock.yaml')
  const gw = await launchGateway(
    { name: 'gateway-demo', repoRoot, configDir, cpu: GATEWAY_CPU },
    (port) => {
      const servers = structuredClone(demoConfig.servers)
      setUpstream(servers, 'weather', weather)
      setUpstream(servers, 'docs', docs)
      return {
        ...demoConfig,
        listen: { host: '127.0.0.1', port },
        origins: [`http://127.0.0.1:${port}`],
        policies,
        servers,
        ...(pinning === undefined ? {} : { pinning: { ...pinning, lockFile } }),
      }
    },
  )
  const phases: Phase[] = [
    { name: 'direct', url: weather, gatewayPids: [] },
    { name: 'gateway', url: `${gw.baseUrl}/mcp/weather`, gatewayPids: processTree(gw.child.pid) },
  ]
  const clkTck = clockTicksPerSecond()
  const results: Record<Phase['name'], SessionResult[]> = { direct: [], gateway: [] }
  for (let r = 0; r < repeat; r++) {
    for (const phase of phases) {
      const spec: SessionSpec = {
        url: phase.url,
        concurrency,
        warmupS,
        durationS,
        clkTck,
        gatewayPids: phase.gatewayPids,
        backendPids,
      }
      const result = await runSessions(spec, r)
      results[phase.name].push(result)
      log(
        `[${r + 1}/${repeat}] ${phase.name}: ${result.sessionsPerS.toFixed(1)} sessions/s, ` +
          `backend ${result.backendCpuUsPerSession.toFixed(0)} µs/session` +
          (result.gatewayCpuUsPerSession === null
            ? ''
            : `, gateway ${result.gatewayCpuUsPerSession.toFixed(0)} µs/session`) +
          (result.failures > 0 ? `, ${result.failures} FAILED requests` : ''),
      )
    }
  }
  const markdown = render(results, { durationS, warmupS, repeat, concurrency })
  process.stdout.write(markdown)
  await mkdir(join(repoRoot, 'bench', 'results'), { recursive: true })
  await writeFile(join(repoRoot, 'bench', 'results', 'system.md'), markdown)
  await writeFile(
    join(repoRoot, 'bench', 'results', 'system.json'),
    `${JSON.stringify(results, null, 2)}\n`,
  )
  const failed = [...results.direct, ...results.gateway].some((x) => x.failures > 0)
  return failed ? 1 : 0
}

function setUpstream(
  servers: Record<string, { upstreams: { url: string }[] }>,
  name: string,
  url: string,
): void {
  const server = servers[name]
  if (server === undefined) throw new Error(`deploy/gateway.demo.yaml has no server ${name}`)
  server.upstreams = [{ url }]
}

async function runSessions(spec: SessionSpec, round: number): Promise<SessionResult> {
  const load = spawnNode(
    `session load ${round}`,
    ['--import', 'tsx', 'bench/session-load.ts', JSON.stringify(spec)],
    { cpu: BACKEND_CPU, nice: 10, cwd: repoRoot },
  )
  const timeoutMs = (spec.warmupS + spec.durationS) * 1000 + 30_000
  const line = await waitForLine(load, /RESULT (.*)\n/, timeoutMs)
  await load.exited
  return JSON.parse(line[1] ?? '') as SessionResult
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? NaN
}

function render(
  results: Record<'direct' | 'gateway', SessionResult[]>,
  meta: Record<string, number>,
): string {
  const direct = results.direct
  const via = results.gateway
  const directCpu = median(direct.map((x) => x.backendCpuUsPerSession))
  const viaBackend = median(via.map((x) => x.backendCpuUsPerSession))
  const viaGateway = median(via.map((x) => x.gatewayCpuUsPerSession ?? NaN))
  // Paired by round: each gateway window against the direct window just before it.
  const pairedRatio = median(
    via.map(
      (x, i) =>
        (x.backendCpuUsPerSession + (x.gatewayCpuUsPerSession ?? NaN)) /
        (direct[i]?.backendCpuUsPerSession ?? NaN),
    ),
  )
  const f = (v: number, d = 0): string => (Number.isFinite(v) ? v.toFixed(d) : 'n/a')
  return [
    '# mcp-edge system bench (agent sessions, demo servers)',
    '',
    ...Object.entries(meta).map(([k, v]) => `- ${k}: ${v}`),
    '- session: server/discover, tools/list, tools/call ×3 (demo-weather)',
    '',
    '| target | sessions/s | session p50 ms | backend µs/session | gateway µs/session | total µs/session |',
    '|---|---:|---:|---:|---:|---:|',
    `| direct | ${f(median(direct.map((x) => x.sessionsPerS)), 1)} | ${f(median(direct.map((x) => x.sessionP50Ms)), 2)} | ${f(directCpu)} | – | ${f(directCpu)} |`,
    `| gateway (demo config) | ${f(median(via.map((x) => x.sessionsPerS)), 1)} | ${f(median(via.map((x) => x.sessionP50Ms)), 2)} | ${f(viaBackend)} | ${f(viaGateway)} | ${f(viaBackend + viaGateway)} |`,
    '',
    `(backend + gateway) ÷ backend direct, CPU per session (median of paired rounds): **${f(pairedRatio, 2)}** (target ≤ 0.8)`,
    '',
  ].join('\n')
}

function log(line: string): void {
  process.stderr.write(`bench:system: ${line}\n`)
}

runScript('bench:system', main)
