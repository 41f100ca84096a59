/**
 * What the bench loads: the backend directly, and the same backend through the gateway in each
 * configuration. Starting the servers lives here; measuring them lives in run.ts.
 */
import { join } from 'node:path'
import { detectListCache } from './check.js'
import { spawnNode, waitForLine } from './children.js'
import { startGateway } from './gateway.js'
import { processTree } from './proc.js'
import type { Cell, TargetId } from './report.js'
import type { BenchMethod } from './requests.js'

/** One thing to load: a URL and whose CPU counts as "gateway" for it. */
export interface Target {
  readonly id: TargetId
  readonly method: BenchMethod
  readonly url: string
  readonly gatewayPids: readonly number[]
}

/** The running backend: cacheable-list endpoint, uncacheable-list endpoint, request counter. */
export interface Backend {
  readonly url: string
  readonly noStoreUrl: string
  readonly statsUrl: string
  readonly pids: readonly number[]
}

export interface TargetPlan {
  readonly targets: readonly Target[]
  /** Rows that are reported without a measurement (the cache-hit row when there is no cache). */
  readonly skipped: readonly Cell[]
  readonly cacheState: string
}

export interface Placement {
  readonly repoRoot: string
  readonly configDir: string
  readonly gatewayCpu: number
  readonly backendCpu: number
}

/** Starts bench/backend.ts pinned, on a port it picks itself. */
export async function startBackend(at: Placement): Promise<Backend> {
  const script = join(at.repoRoot, 'bench', 'backend.ts')
  const args = ['--import', 'tsx', script, '--port', '0', '--lifeline']
  const child = spawnNode('backend', args, { cpu: at.backendCpu, cwd: at.repoRoot })
  const match = await waitForLine(child, /listening (\d+)/, 20_000)
  const base = `http://127.0.0.1:${match[1] ?? ''}`
  return {
    url: `${base}/mcp`,
    noStoreUrl: `${base}/mcp-nostore`,
    statsUrl: `${base}/__stats`,
    pids: processTree(child.pid),
  }
}

/** The direct targets only, for runs without a gateway. */
export function directTargets(backend: Backend): TargetPlan {
  const methods: readonly BenchMethod[] = ['tools/call', 'tools/list']
  const targets = methods.map((method) => direct(backend, method))
  return { targets, skipped: [], cacheState: 'not run (direct only)' }
}

/** Starts both gateway configurations and probes for a list cache. */
export async function gatewayTargets(at: Placement, backend: Backend): Promise<TargetPlan> {
  const common = { repoRoot: at.repoRoot, configDir: at.configDir, cpu: at.gatewayCpu }
  const trusting = await startGateway({
    ...common,
    name: 'gateway',
    // `nostore` serves an uncacheable list, so tools/list forwarding stays measurable with a cache.
    servers: { bench: backend.url, nostore: backend.noStoreUrl },
    trustHeaders: true,
  })
  const verifying = await startGateway({
    ...common,
    name: 'gateway-verify',
    servers: { bench: backend.url },
    trustHeaders: false,
  })
  const trustPids = processTree(trusting.child.pid)
  const verifyPids = processTree(verifying.child.pid)
  const via = (id: TargetId, method: BenchMethod, url: string, pids: readonly number[]) =>
    ({ id, method, url, gatewayPids: pids }) satisfies Target
  const targets: Target[] = [
    direct(backend, 'tools/call'),
    via('gateway', 'tools/call', `${trusting.baseUrl}/mcp/bench`, trustPids),
    via('gateway-verify', 'tools/call', `${verifying.baseUrl}/mcp/bench`, verifyPids),
    direct(backend, 'tools/list'),
    via('gateway', 'tools/list', `${trusting.baseUrl}/mcp/nostore`, trustPids),
  ]
  const cacheUrl = `${trusting.baseUrl}/mcp/bench`
  if (!(await detectListCache(cacheUrl, backend.statsUrl))) {
    const skipped: Cell = {
      method: 'tools/list',
      target: 'cache-hit',
      connections: 0,
      skipped: 'cache: not active',
    }
    return { targets, skipped: [skipped], cacheState: 'not active' }
  }
  targets.push(via('cache-hit', 'tools/list', cacheUrl, trustPids))
  return { targets, skipped: [], cacheState: 'active' }
}

function direct(backend: Backend, method: BenchMethod): Target {
  return { id: 'direct', method, url: backend.url, gatewayPids: [] }
}
