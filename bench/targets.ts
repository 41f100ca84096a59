/**
 * What the bench loads: the backend directly, and the same backend through the gateway in each
 * configuration. Starting the servers lives here; measuring them lives in run.ts.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdir, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { exportSPKI, generateKeyPair, SignJWT } from 'jose'
import { detectListCache } from './check.js'
import { spawnNode, waitForLine } from './children.js'
import { shippedNodeFlags, startGateway } from './gateway.js'
import { processTree } from './proc.js'
import type { Cell, TargetId } from './report.js'
import type { BenchMethod } from './requests.js'

/** One thing to load: a URL and whose CPU counts as "gateway" for it. */
export interface Target {
  readonly id: TargetId
  readonly method: BenchMethod
  readonly url: string
  readonly gatewayPids: readonly number[]
  /** Headers every request to this target carries on top of the MCP ones (a bearer token). */
  readonly headers?: Readonly<Record<string, string>>
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
export async function startBackend(
  at: Placement,
  extraArgs: readonly string[] = [],
): Promise<Backend> {
  const script = join(at.repoRoot, 'bench', 'backend.ts')
  const args = ['--import', 'tsx', script, '--port', '0', '--lifeline', ...extraArgs]
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

/**
 * The floor proxy (floor.ts) pinned where the gateway runs: node:http + undici `Pool.stream`, no
 * parsing, no logging. Its CPU per request is what any Node proxy hop costs on this machine. It
 * runs with the node flags the gateway ships with (gateway.ts `shippedNodeFlags`).
 */
export async function floorTargets(
  at: Placement,
  backend: Backend,
  nodeFlags: readonly string[] = [],
): Promise<Target[]> {
  const script = join(at.repoRoot, 'bench', 'floor.ts')
  const upstream = new URL(backend.url).origin
  const args = [
    ...shippedNodeFlags(at.repoRoot),
    ...nodeFlags,
    ...['--import', 'tsx', script, '--upstream', upstream, '--port', '0', '--lifeline'],
  ]
  const child = spawnNode('floor', args, { cpu: at.gatewayCpu, cwd: at.repoRoot })
  const match = await waitForLine(child, /listening (\d+)/, 20_000)
  const base = `http://127.0.0.1:${match[1] ?? ''}`
  const pids = processTree(child.pid)
  return [
    { id: 'floor', method: 'tools/call', url: `${base}/mcp`, gatewayPids: pids },
    // The uncacheable list, as the forwarded `gateway` tools/list row.
    { id: 'floor', method: 'tools/list', url: `${base}/mcp-nostore`, gatewayPids: pids },
  ]
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
    // The same tools/call through a virtual server over `bench` (docs/virtual-servers.md): the
    // routed call against the member's own endpoint, in one process.
    extra: { virtualServers: { virtual: { members: ['bench'] } } },
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
  const floor = await floorTargets(at, backend)
  const targets: Target[] = [
    direct(backend, 'tools/call'),
    ...floor.filter((t) => t.method === 'tools/call'),
    via('gateway', 'tools/call', `${trusting.baseUrl}/mcp/bench`, trustPids),
    via('gateway-verify', 'tools/call', `${verifying.baseUrl}/mcp/bench`, verifyPids),
    via('gateway-virtual', 'tools/call', `${trusting.baseUrl}/mcp/virtual`, trustPids),
    direct(backend, 'tools/list'),
    ...floor.filter((t) => t.method === 'tools/list'),
    via('gateway', 'tools/list', `${trusting.baseUrl}/mcp/nostore`, trustPids),
  ]
  targets.push(...(await limitTargets(at, backend)))
  targets.push(...(await authPolicyTargets(at, backend)))
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
  targets.push(...(await curatedTargets(at, backend)))
  return { targets, skipped: [], cacheState: 'active' }
}

function direct(backend: Backend, method: BenchMethod): Target {
  return { id: 'direct', method, url: backend.url, gatewayPids: [] }
}

/** One allow-all rule, and (for the limited targets) one rate limit on every tool call. */
const ALLOW_ALL = 'rules:\n  - name: all\n    servers: ["*"]\n    allow: { tools: ["*"] }\n'
const NEVER_REACHED_LIMIT =
  'limits:\n  - name: bench\n    servers: ["*"]\n    tools: ["*"]\n    key: ip\n' +
  '    rate: 999999999/second\n    burst: 1000000000\n'

/**
 * tools/call through a policy, the same policy plus a local rate limit, and plus a Redis-held one
 * (when redis-server is installed): the CPU a limit adds is the difference to the policy row.
 */
async function limitTargets(at: Placement, backend: Backend): Promise<Target[]> {
  const folder = async (name: string, text: string): Promise<string> => {
    const dir = join(at.configDir, name)
    await mkdir(dir, { recursive: true })
    await writeFile(join(dir, 'policy.yaml'), text)
    return dir
  }
  const allow = await folder('policy-allow', ALLOW_ALL)
  const limited = await folder('policy-limit', ALLOW_ALL + NEVER_REACHED_LIMIT)
  const common = {
    repoRoot: at.repoRoot,
    configDir: at.configDir,
    cpu: at.gatewayCpu,
    servers: { bench: backend.url },
    trustHeaders: true,
  }
  const specs: [TargetId, Record<string, unknown>][] = [
    ['gateway-policy', { policies: allow }],
    ['gateway-limit', { policies: limited }],
  ]
  const redis = await startRedis(at.backendCpu)
  if (redis !== undefined)
    specs.push(['gateway-limit-redis', { policies: limited, rateLimits: { redis } }])
  const targets: Target[] = []
  for (const [id, extra] of specs) {
    const gw = await startGateway({ ...common, name: id, extra })
    const pids = processTree(gw.child.pid)
    const url = `${gw.baseUrl}/mcp/bench`
    targets.push({ id, method: 'tools/call', url, gatewayPids: pids })
    // The cacheable list behind an org-wide policy filter: the filtered bytes stay `public`
    // (docs/cache.md "Policy after the cache"), so every caller is served from one entry.
    if (id === 'gateway-policy' && (await detectListCache(url, backend.statsUrl)))
      targets.push({ id: 'cache-hit-policy', method: 'tools/list', url, gatewayPids: pids })
  }
  return targets
}

/**
 * The cacheable list with a curated catalog view (docs/catalog.md §Curation): two tools renamed,
 * two re-described or re-titled. The rewrite depends on the config only, so the list
 * stays `public` and the curated bytes are built once per cached list: a hit should cost what a
 * `cache-hit` hit costs.
 */
async function curatedTargets(at: Placement, backend: Backend): Promise<Target[]> {
  const bench = {
    upstreams: [{ url: backend.url }],
    trustHeaders: true,
    tools: {
      get_forecast: { name: 'forecast', description: 'Forecast for a city (metric units).' },
      // Nothing hidden: the bench checks every answer carries all 60 tools.
      tool_01: { name: 'renamed_01', title: 'Renamed' },
      tool_02: { description: 'Reviewed text in place of the backend’s.' },
    },
  }
  const gw = await startGateway({
    repoRoot: at.repoRoot,
    configDir: at.configDir,
    cpu: at.gatewayCpu,
    name: 'cache-hit-curated',
    servers: { bench: backend.url },
    trustHeaders: true,
    extra: { servers: { bench } },
  })
  const url = `${gw.baseUrl}/mcp/bench`
  if (!(await detectListCache(url, backend.statsUrl))) return []
  return [
    { id: 'cache-hit-curated', method: 'tools/list', url, gatewayPids: processTree(gw.child.pid) },
  ]
}

const BENCH_ISSUER = 'https://issuer.bench.invalid'
const BENCH_AUDIENCE = 'mcp-edge-bench'

/**
 * Twenty rules, as an organisation's allowlist might have, all naming the bench server so every one
 * is looked at: eighteen allowing other tool families, one deny and the one that lets the bench
 * tool through. None depends on claims, so answers stay shareable.
 */
function twentyRules(condition: boolean): string {
  const lines = ['rules:']
  for (let i = 0; i < 18; i++)
    lines.push(`  - name: team-${i}`, '    servers: [bench]', `    allow: { tools: ["t${i}_*"] }`)
  lines.push('  - name: no-deletes', '    servers: ["*"]', '    deny: { tools: ["delete_*"] }')
  lines.push('  - name: bench', '    servers: [bench]', '    allow: { tools: ["get_*"] }')
  // The profile's "one condition" cell: the bench call's argument judged by CEL.
  if (condition) lines.push(`    if: 'args.city != "nowhere"'`)
  return `${lines.join('\n')}\n`
}

/**
 * The default config (`trustHeaders: false`) with JWT auth (an ES256 key from a file, a token the
 * load presents; verified tokens are remembered as in production) and the 20-rule policy.
 */
export async function authPolicyTargets(
  at: Placement,
  backend: Backend,
  /** The allowing rule carries one condition (`bench:profile`'s `gateway-auth-condition`). */
  condition = false,
): Promise<Target[]> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true })
  const keyFile = join(at.configDir, 'bench-key.pem')
  await writeFile(keyFile, await exportSPKI(publicKey))
  const token = await new SignJWT({ scope: 'mcp' })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer(BENCH_ISSUER)
    .setAudience(BENCH_AUDIENCE)
    .setSubject('bench-agent')
    .setIssuedAt()
    .setExpirationTime('6h')
    .sign(privateKey)
  const dir = join(at.configDir, 'policy-twenty')
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'policy.yaml'), twentyRules(condition))
  const gw = await startGateway({
    repoRoot: at.repoRoot,
    configDir: at.configDir,
    cpu: at.gatewayCpu,
    name: 'gateway-auth-policy',
    servers: { bench: backend.url },
    trustHeaders: false,
    extra: {
      policies: dir,
      auth: {
        publicUrl: 'http://127.0.0.1',
        jwt: {
          issuer: BENCH_ISSUER,
          audience: BENCH_AUDIENCE,
          publicKeyFile: keyFile,
          algorithms: ['ES256'],
        },
      },
    },
  })
  return [
    {
      id: 'gateway-auth-policy',
      method: 'tools/call',
      url: `${gw.baseUrl}/mcp/bench`,
      gatewayPids: processTree(gw.child.pid),
      headers: { authorization: `Bearer ${token}` },
    },
  ]
}

/** redis-server pinned beside the backend, killed with the bench; undefined when not installed. */
async function startRedis(cpu: number): Promise<string | undefined> {
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) return undefined
  const port = await new Promise<number>((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address()
      srv.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0))
    })
  })
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
  const child =
    spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0
      ? spawn('taskset', ['-c', String(cpu), 'redis-server', ...args], {
          stdio: ['ignore', 'pipe', 'ignore'],
        })
      : spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'ignore'] })
  process.once('exit', () => child.kill('SIGKILL'))
  await new Promise<void>((resolve, reject) => {
    let out = ''
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('Ready to accept connections')) resolve()
    })
    child.once('exit', () => reject(new Error(`redis-server exited: ${out}`)))
  })
  return `redis://127.0.0.1:${port}`
}
