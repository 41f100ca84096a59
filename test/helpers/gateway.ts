import { onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { startGateway, type RunningGateway, type StartOptions } from '../../src/server.js'

/** A gateway started for one test, with its log lines captured. */
export interface TestGateway extends RunningGateway {
  /** `${url}/mcp/<server>` */
  mcpUrl(server: string): string
  /** Every JSON log line written so far. */
  readonly logs: Record<string, unknown>[]
}

/**
 * Starts a gateway on 127.0.0.1:0 with `config` (an object, serialised to YAML so it goes through
 * the same loader as a file) and closes it when the test finishes.
 */
export async function startTestGateway(
  config: Record<string, unknown>,
  opts: {
    dir?: string
    env?: NodeJS.ProcessEnv
    autoClose?: boolean
    /** Drain time given to close() when the test ends (default 200 ms). */
    closeMs?: number
    /** false: no admin listener (the default adds one on a free loopback port). */
    admin?: false
    /** Passed to startGateway (clocks, watch); the log always goes to `logs`. */
    start?: Omit<StartOptions, 'logDestination'>
  } = {},
): Promise<TestGateway> {
  const logs: Record<string, unknown>[] = []
  // An admin listener on a free loopback port unless the config names one (or `admin: false`):
  // /readyz with its details and the status page are there (docs/operations.md §Status page).
  const text = stringify({
    listen: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    ...(opts.admin !== false && ADMIN),
    ...config,
  })
  const loaded = parseConfigText(text, { dir: opts.dir ?? process.cwd(), env: opts.env ?? {} })
  const gw = await startGateway(loaded, {
    ...opts.start,
    logDestination: {
      write(line: string) {
        logs.push(JSON.parse(line) as Record<string, unknown>)
      },
    },
  })
  if (opts.autoClose !== false) onTestFinished(() => gw.close(opts.closeMs ?? 200))
  return Object.assign(gw, { logs, mcpUrl: (server: string) => `${gw.url}/mcp/${server}` })
}

/** Config for one server named `name` in front of `url`. */
export function oneServer(
  url: string,
  server: Record<string, unknown> = {},
  name = 'app',
): Record<string, unknown> {
  return { servers: { [name]: { upstreams: [{ url }], ...server } } }
}

/**
 * The admin listener of a gateway whose config sets `admin:` (port 0 is fine): /metrics, /readyz
 * with its details, the status page (docs/operations.md §Status page).
 */
export function adminUrl(gw: RunningGateway): string {
  if (gw.adminPort === undefined) throw new Error('this gateway has no admin listener (admin:)')
  return `http://127.0.0.1:${gw.adminPort}`
}

/** Config that adds an admin listener on a free loopback port. */
export const ADMIN = { admin: { host: '127.0.0.1', port: 0 } } as const
