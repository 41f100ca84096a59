import { execFile } from 'node:child_process'
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

/**
 * Drives the official MCP conformance suite (`@modelcontextprotocol/conformance`, a
 * devDependency) as its CLI documents: `conformance server --url <url> -o <dir>` runs every
 * server scenario against one URL and writes `<dir>/server-<scenario>-<timestamp>/checks.json`
 * per scenario. The suite needs Node ≥ 22; it runs under `process.execPath`, the Node running
 * the tests.
 */

const require = createRequire(import.meta.url)
// Literal specifiers, so that knip sees the devDependency in use.
const MANIFEST = require.resolve('@modelcontextprotocol/conformance/package.json')

/** The CLI's entry point, from the package's own manifest (its `bin`). */
const CONFORMANCE_BIN = join(
  dirname(MANIFEST),
  (require(MANIFEST) as { bin: { conformance: string } }).bin.conformance,
)

/** Node 22 or later: what the suite's dependencies need. */
export const NODE_RUNS_SUITE = Number(process.versions.node.split('.')[0]) >= 22

/** One check as the suite writes it (its `ConformanceCheck`). */
interface Check {
  readonly id: string
  readonly name: string
  readonly status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO'
  readonly errorMessage?: string
}

/** A scenario's outcome: passed when it wrote checks and none of them failed. */
export interface ScenarioResult {
  readonly scenario: string
  readonly passed: boolean
  /** Ids of the checks that succeeded (a WARNING or INFO check is not among them). */
  readonly succeeded: ReadonlySet<string>
  /** The failed checks, `id: errorMessage`, or why there are no checks. */
  readonly failures: readonly string[]
}

/** Runs the CLI; resolves with its stdout then stderr. */
function run(args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CONFORMANCE_BIN, ...args],
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1' } },
      (error, stdout, stderr) => {
        // `server` exits 1 when a check fails: that is a result, read from the files.
        if (error !== null && (error.killed || typeof error.code !== 'number')) {
          // The last lines say which scenario it was in when it was stopped.
          const last = `${stdout}\n${stderr}`.slice(-4000)
          reject(new Error(`conformance ${args.join(' ')}: ${error.message}\n${last}`))
        } else resolve(`${stdout}\n${stderr}`)
      },
    )
  })
}

/** The names of the server scenarios the suite has (`conformance list --server`). */
export async function serverScenarios(): Promise<string[]> {
  const out = await run(['list', '--server'], 30_000)
  const names = [...out.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1] as string)
  if (names.length === 0) throw new Error(`no server scenarios in:\n${out}`)
  return names
}

/**
 * Runs server scenarios against `url` and reads each one's checks: `scenarios` is either every
 * scenario ({@link serverScenarios}; run as `--suite all`, the pending ones too) or one name (run
 * as `--scenario`). Each of `scenarios` gets a result: one the suite could not run wrote no checks
 * and is reported failed.
 */
export async function runServerSuite(
  url: string,
  scenarios: readonly string[],
  timeoutMs: number,
): Promise<Map<string, ScenarioResult>> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-conformance-'))
  const which = scenarios.length === 1 ? ['--scenario', scenarios[0] as string] : ['--suite', 'all']
  try {
    const output = await run(['server', '--url', url, ...which, '-o', dir], timeoutMs)
    const results = new Map<string, ScenarioResult>()
    for (const entry of await readdir(dir)) {
      const scenario = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry)?.[1]
      if (scenario === undefined || !scenarios.includes(scenario)) continue
      const checks = JSON.parse(await readFile(join(dir, entry, 'checks.json'), 'utf8')) as Check[]
      const failed = checks.filter((c) => c.status === 'FAILURE')
      results.set(scenario, {
        scenario,
        passed: failed.length === 0,
        succeeded: new Set(checks.filter((c) => c.status === 'SUCCESS').map((c) => c.id)),
        failures: failed.map((c) => `${c.id}: ${c.errorMessage ?? c.name}`),
      })
    }
    for (const scenario of scenarios) {
      if (!results.has(scenario))
        results.set(scenario, {
          scenario,
          passed: false,
          succeeded: new Set(),
          failures: [`no checks written; the run said:\n${excerpt(output, scenario)}`],
        })
    }
    return results
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** The suite's output from `=== Running scenario: <name>` to the next scenario, and stderr. */
function excerpt(output: string, scenario: string): string {
  const start = output.indexOf(`=== Running scenario: ${scenario} ===`)
  if (start < 0) return '(scenario not run)'
  const next = output.indexOf('=== Running scenario:', start + 1)
  return output.slice(start, next < 0 ? start + 2000 : next).slice(0, 2000)
}
