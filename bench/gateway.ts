/** Starts the built gateway (`dist/cli.js serve --config …`) pinned, and waits for /healthz. */
import { existsSync, readFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { spawnNode, type Child } from './children.js'

/** A running gateway and the base URL its routes hang off. */
export interface Gateway {
  readonly child: Child
  readonly baseUrl: string
}

export interface GatewaySpec {
  readonly name: string
  readonly repoRoot: string
  readonly configDir: string
  /** Server name → upstream URL; each is served at POST /mcp/<name>. */
  readonly servers: Readonly<Record<string, string>>
  readonly trustHeaders: boolean
  readonly cpu: number | string
  /** More top-level config keys (policies, rateLimits). */
  readonly extra?: Readonly<Record<string, unknown>>
}

const HEALTH_TIMEOUT_MS = 20_000

/**
 * The gateway entry point: what `npm run build` produced, or BENCH_GATEWAY_ENTRY to bench another
 * build (say, the previous release) through the same harness.
 */
export function gatewayEntry(repoRoot: string): string {
  return process.env['BENCH_GATEWAY_ENTRY'] || join(repoRoot, 'dist', 'cli.js')
}

/**
 * The node flags the gateway ships with: those on its entry point's `#!/usr/bin/env -S node …`
 * line, which `mcp-edge` and the container run through (src/cli.ts). The bench starts
 * `node <flags> cli.js` so that it measures what operators run; the floor proxy gets the same
 * flags, so that gateway ÷ floor compares the work and not a V8 setting.
 */
export function shippedNodeFlags(repoRoot: string): string[] {
  const entry = gatewayEntry(repoRoot)
  if (!existsSync(entry)) return []
  const first = readFileSync(entry, 'utf8').split('\n', 1)[0] ?? ''
  const shebang = /^#!\S*env -S node((?: --?[\w-]+(?:=\S+)?)*)\s*$/.exec(first)
  return (shebang?.[1] ?? '').split(' ').filter((f) => f !== '')
}

/** Writes the config, starts the gateway and resolves once GET /healthz answers 200. */
export function startGateway(spec: GatewaySpec): Promise<Gateway> {
  const servers = Object.fromEntries(
    Object.entries(spec.servers).map(([name, url]) => [
      name,
      { upstreams: [{ url }], trustHeaders: spec.trustHeaders },
    ]),
  )
  // Production defaults: access log at info (to /dev/null-like pipe) and the edge cache on, so the
  // figures are what an operator runs. The cache only answers the public list of `bench`.
  return launchGateway(spec, (port) => ({
    listen: { host: '127.0.0.1', port },
    servers,
    log: { level: process.env['BENCH_LOG_LEVEL'] ?? 'info' },
    cache: {},
    ...spec.extra,
  }))
}

/** Where a gateway process runs, whatever its config. */
export type LaunchSpec = Pick<GatewaySpec, 'name' | 'repoRoot' | 'configDir' | 'cpu'>

/** Starts the built gateway with the config `build` returns for a free port. */
export async function launchGateway(
  spec: LaunchSpec,
  build: (port: number) => Record<string, unknown>,
): Promise<Gateway> {
  const entry = gatewayEntry(spec.repoRoot)
  if (!existsSync(entry)) {
    throw new Error(
      `gateway not built: ${entry} is missing. Run \`npm run build\` first, ` +
        'or set BENCH_DIRECT_ONLY=1 to measure the backend alone.',
    )
  }
  const port = await freePort()
  const configPath = join(spec.configDir, `${spec.name}.yaml`)
  await writeFile(configPath, stringify(build(port)))
  // BENCH_GATEWAY_FLAGS: node flags for every gateway (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
  const flags = (process.env['BENCH_GATEWAY_FLAGS'] ?? '').split(' ').filter((f) => f !== '')
  const args = [
    ...shippedNodeFlags(spec.repoRoot),
    ...flags,
    entry,
    'serve',
    '--config',
    configPath,
  ]
  const child = spawnNode(spec.name, args, { cpu: spec.cpu, cwd: spec.repoRoot })
  const baseUrl = `http://127.0.0.1:${port}`
  await waitHealthy(child, `${baseUrl}/healthz`, configPath)
  return { child, baseUrl }
}

async function waitHealthy(child: Child, url: string, configPath: string): Promise<void> {
  let exitCode: string | undefined
  void child.exited.then((code) => (exitCode = code))
  const deadline = Date.now() + HEALTH_TIMEOUT_MS
  let lastError = 'no answer yet'
  while (Date.now() < deadline) {
    if (exitCode !== undefined) {
      throw new Error(
        `${child.name} exited (${exitCode}) before becoming healthy ` +
          `(config ${configPath}):\n${child.output()}`,
      )
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      if (res.status === 200) return
      lastError = `GET /healthz → ${res.status}`
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(
    `${child.name} did not become healthy within ${HEALTH_TIMEOUT_MS} ms (${lastError}); ` +
      `config ${configPath}:\n${child.output()}`,
  )
}

/**
 * A port that was free a moment ago. The gateway needs its port in the config file, so the usual
 * listen-on-0 is not available; the race with other processes is acceptable for a bench.
 */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port'))))
    })
  })
}
