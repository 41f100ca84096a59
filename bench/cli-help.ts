/**
 * `npm run bench:cli`: how long the `mcp-edge` binary takes to print its help, wall time from
 * spawn to exit, for each way of asking (`--help`, `-h`, `help <command>`, `<command> --help`).
 * Help loads src/cli/usage.ts alone (src/cli.ts), so this is Node's start-up and one small
 * module; a command that starts importing the gateway for its help shows here as seconds. Runs
 * the compiled binary (dist/cli.js, as installed). Fails when a median passes BUDGET_MS.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const BUDGET_MS = Number(process.env.BENCH_CLI_BUDGET_MS ?? 300)
const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 15)
const root = fileURLToPath(new URL('..', import.meta.url))
const ASKS = [
  ['--help'],
  ['-h'],
  ['help'],
  ['help', 'explain'],
  ['explain', '--help'],
  ['pin', '-h'],
]

function once(args: readonly string[], node: readonly string[] = ['dist/cli.js']): number {
  const start = performance.now()
  const r = spawnSync(process.execPath, [...node, ...args], { cwd: root, encoding: 'utf8' })
  const ms = performance.now() - start
  if (r.status !== 0 || r.stdout.length === 0)
    throw new Error(`mcp-edge ${args.join(' ')}: exit ${String(r.status)}: ${r.stderr}`)
  return ms
}

/** The median of RUNS spawns, and the slowest. */
function timed(run: () => number): { median: number; max: number } {
  const times = Array.from({ length: RUNS }, run).sort((a, b) => a - b)
  return { median: times[Math.floor(times.length / 2)] as number, max: times[RUNS - 1] as number }
}

// Node alone, for scale: what any command pays before its first line runs.
const bare = timed(() => once([], ['-e', 'process.stdout.write("x")']))
let failed = false
console.log(`| mcp-edge … | median ms | max ms | budget ${BUDGET_MS} ms |\n|---|---:|---:|---|`)
for (const args of ASKS) {
  const { median, max } = timed(() => once(args))
  const ok = median <= BUDGET_MS
  failed ||= !ok
  console.log(
    `| ${args.join(' ')} | ${median.toFixed(0)} | ${max.toFixed(0)} | ${ok ? 'ok' : 'OVER'} |`,
  )
}
console.log(`| (node alone) | ${bare.median.toFixed(0)} | ${bare.max.toFixed(0)} | |`)
process.exitCode = failed ? 1 : 0
