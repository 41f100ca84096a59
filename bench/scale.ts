/**
 * `npm run bench:scale`: what the gateway costs as its configuration grows (bench/README.md
 * §scale). Curves, each as ratios to its smallest point measured in the same run:
 *
 * - rules (1 → 10,000): in process, a decision and a caller's list view (scale-inproc.ts); from
 *   outside, the built gateway's start, RSS and CPU per forwarded `tools/call` (/proc);
 * - a reload of the 10,000-rule policy under load: p99 from the signal to a second after the
 *   swap, against the same stretch of a control run, and of two control runs (an A/A pair);
 * - tools per list (60 → 5,000), in process: the list filter and the answer check per tool;
 * - virtual members (2 → 50, 50 tools each) and servers (1 → 200), from outside (scale-fleet.ts).
 *
 * Placement as `npm run bench`: the gateway on CPU 0, the backend on CPU 1, this process (the
 * load) on CPU 1 niced. CPU per request is the gateway's utime+stime over a window cut out of a
 * continuous load; points run in alternating order over `BENCH_SCALE_ROUNDS` rounds, medians.
 * `BENCH_QUICK=1` shortens every window (a smoke test).
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { setPriority, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { hasTaskset, runScript, spawnNode, waitForLine } from './children.js'
import type { Gateway } from './gateway.js'
import { clockTicksPerSecond, hasProcStat } from './proc.js'
import { buildRequest } from './requests.js'
import { fleetCurves, type FleetReport } from './scale-fleet.js'
import {
  listCurve,
  reloadGaps,
  ruleCurve,
  rulesYaml,
  sunk,
  type ListPoint,
  type ReloadGaps,
  type RulePoint,
} from './scale-inproc.js'
import {
  percentile,
  rssMb,
  runLoad,
  spread,
  stop,
  timedGateway,
  warmUp,
  whenPrinted,
  type LoadResult,
  type Scale,
} from './scale-load.js'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))
const QUICK = process.env['BENCH_QUICK'] === '1'
const ROUNDS = Number(process.env['BENCH_SCALE_ROUNDS'] ?? (QUICK ? 1 : 3))
const WINDOW_MS = QUICK ? 700 : 2000
const WARMUP_MS = QUICK ? 300 : 700
const CONNECTIONS = 16
const GATEWAY_CPU = 0
const BACKEND_CPU = 1
const RULES = [1, 100, 1000, 10_000]
/** `BENCH_SCALE_CURVES`: which curves to run (default all). */
const CURVES = (process.env['BENCH_SCALE_CURVES'] ?? 'rules,reload,lists,members,servers').split(
  ',',
)
const wanted = (curve: string): boolean => CURVES.includes(curve)
const TOOLS = [60, 500, 1000, 5000]

const CALL = buildRequest('tools/call')

interface RuleGateway {
  readonly rules: number
  readonly gw: Gateway
  readonly pids: number[]
  readonly folder: string
  readonly startMs: number
  readonly rssAtStartMb: number
}

interface OutsideRulePoint {
  readonly rules: number
  readonly startMs: number
  readonly rssAtStartMb: number
  readonly rssAfterLoadMb: number
  readonly cpuUs: { median: number; least: number }
  /** Answers per second at c=16 (median over rounds). */
  readonly rps: number
}

/** The built gateway with each policy size, started. */
async function startRuleGateways(s: Scale): Promise<RuleGateway[]> {
  const gateways: RuleGateway[] = []
  for (const rules of RULES) {
    const folder = join(s.configDir, `rules-${rules}`)
    mkdirSync(folder, { recursive: true })
    writeFileSync(join(folder, 'policy.yaml'), rulesYaml(rules))
    const { gw, startMs, pids } = await timedGateway(s, `rules-${rules}`, (port) => ({
      listen: { host: '127.0.0.1', port },
      servers: { bench: { upstreams: [{ url: `${s.backend}/mcp` }] } },
      policies: folder,
    }))
    gateways.push({ rules, gw, pids, folder, startMs, rssAtStartMb: rssMb(gw.child.pid) })
  }
  return gateways
}

/** The gateways of startRuleGateways from outside: start, RSS, CPU per forwarded call. */
async function rulesOutside(
  s: Scale,
  gateways: RuleGateway[],
): Promise<{ points: OutsideRulePoint[]; big: RuleGateway }> {
  // Each gateway is warmed up first: the JIT's first seconds would otherwise be a round's cost.
  for (const g of gateways) await warmUp(s, `${g.gw.baseUrl}/mcp/bench`, CALL, g.pids)
  const cpu = gateways.map(() => [] as number[])
  const rps = gateways.map(() => [] as number[])
  for (let r = 0; r < s.rounds; r++) {
    const order = r % 2 === 0 ? gateways.keys() : [...gateways.keys()].reverse()
    for (const i of order) {
      const g = gateways[i] as RuleGateway
      const result = await runLoad({
        url: `${g.gw.baseUrl}/mcp/bench`,
        ...CALL,
        connections: CONNECTIONS,
        warmupMs: s.warmupMs,
        durationMs: s.windowMs,
        pids: g.pids,
        clkTck: s.clkTck,
      })
      if (result.failures > 0) throw new Error(`rules-${g.rules}: ${result.failures} failures`)
      cpu[i]?.push(result.cpuUsPerRequest)
      rps[i]?.push(result.rps)
    }
  }
  const points = gateways.map((g, i) => ({
    rules: g.rules,
    startMs: g.startMs,
    rssAtStartMb: g.rssAtStartMb,
    rssAfterLoadMb: rssMb(g.gw.child.pid),
    cpuUs: spread(cpu[i] as number[]),
    rps: spread(rps[i] as number[]).median,
  }))
  for (const g of gateways.slice(0, -1)) await stop(g.gw)
  return { points, big: gateways[gateways.length - 1] as RuleGateway }
}

interface ReloadRun {
  /**
   * `reload`: a reload against a control run. `none`: two control runs against each other over
   * the stretch of the reload before it (an A/A pair): how far p99 moves with no reload at all.
   */
  readonly kind: 'reload' | 'none'
  /** Requests per second sent (an open loop, a quarter of what the gateway answered at c=16). */
  readonly rate: number
  /** SIGHUP to the `config reloaded` line, ms. */
  readonly reloadMs: number
  /**
   * p99 and worst latency of the answers ending from SIGHUP to a second after the swap (the
   * collections of the old policy that follow it included).
   */
  readonly p99DuringMs: number
  readonly maxDuringMs: number
  /** The same over the same stretch of the control run: the same load, no reload. */
  readonly p99WithoutMs: number
  readonly maxWithoutMs: number
}

/**
 * `BENCH_SCALE_SPLIT=1`: the rule each reload edits (`everyone`, the last) in a file of its own,
 * the other rules in `policy.yaml`. The reader then parses only that file again
 * (docs/policy.md §Hot reload), as for an edit of one small file of a large folder.
 */
const SPLIT = process.env['BENCH_SCALE_SPLIT'] === '1'

/** The policy files of reload `k` (undefined: as started), by name. */
function reloadFiles(rules: number, k?: number): Record<string, string> {
  const base = rulesYaml(rules)
  const text = k === undefined ? base : base.replace('"get_*"', `"get_*", "reload_${k}_*"`)
  if (!SPLIT) return { 'policy.yaml': text }
  const at = text.indexOf('  - name: everyone')
  return { 'policy.yaml': text.slice(0, at), 'zz-everyone.yaml': `rules:\n${text.slice(at)}` }
}

/** `BENCH_SCALE_RELOADS`: reloads under load, each paired with a control run. */
const RELOADS = Number(process.env['BENCH_SCALE_RELOADS'] ?? (QUICK ? 1 : 4))
/** When the reload starts in a run, and how long its run's window lasts. */
const RELOAD_AT_MS = 2000
const RELOAD_WINDOW_MS = QUICK ? 6000 : 8000

/**
 * Reloads the 10,000-rule policy under load, each reload paired with a control run: the same
 * gateway under the same load for the same time, with no reload. The file is rewritten (one rule
 * changed, the same shape, so the rules are swapped under the running runtime) and the gateway
 * told with SIGHUP two seconds into the window. "During" is the stretch from the signal to a
 * second after the `config reloaded` line; "without" is the same stretch of the control run. The
 * pair runs in alternating order, so neither side always follows the other. The load is an open
 * loop at a quarter of the rate the gateway answered at c=16 (`BENCH_SCALE_RATE` sets it), every
 * latency counted from when its request was due, so a pause of the serving thread shows in full
 * rather than as fewer requests (a closed loop waits with the gateway).
 *
 * Each reload is followed by an A/A pair: two more control runs, held against each other over the
 * same stretch as that reload. Their ratio is what the bench reads with nothing reloaded (this
 * machine's own pauses, the load's and the gateway's collections), so a reload's ratio is read
 * against it rather than against 1.
 */
async function reloadUnderLoad(
  s: Scale,
  g: RuleGateway,
  rps: number,
  runs: number,
): Promise<ReloadRun[]> {
  const out: ReloadRun[] = []
  const rate = Number(process.env['BENCH_SCALE_RATE'] ?? Math.round(rps / 4))
  const load = (onWindow: (startMs: number) => void): ReturnType<typeof runLoad> =>
    runLoad({
      url: `${g.gw.baseUrl}/mcp/bench`,
      ...CALL,
      connections: 64,
      rate,
      warmupMs: s.warmupMs,
      durationMs: RELOAD_WINDOW_MS,
      pids: g.pids,
      clkTck: s.clkTck,
      onWindow,
    })
  if (SPLIT) {
    // Split before the runs, then left for the gateway's poll and this SIGHUP to read (a poll
    // between the two writes may find the last rule twice, and keep what runs).
    for (const [name, text] of Object.entries(reloadFiles(g.rules)))
      writeFileSync(join(g.folder, name), text)
    g.gw.child.proc.kill('SIGHUP')
    await new Promise((r) => setTimeout(r, 5000))
  }
  for (let k = 0; k < runs; k++) {
    let hup = Number.NaN
    let reloaded: Promise<number> = Promise.reject(new Error('no reload was started'))
    reloaded.catch(() => undefined)
    // Made before the load: this process is the load, and building 1.3 MB of YAML in it when
    // the reload starts held its event loop, so the requests due meanwhile went out late and
    // counted that as the gateway's latency.
    const [edited, text] = Object.entries(reloadFiles(g.rules, k)).at(-1) as [string, string]
    const withReload = async (): Promise<LoadResult> => {
      const result = await load(() => {
        setTimeout(() => {
          writeFileSync(join(g.folder, edited), text)
          reloaded = whenPrinted(g.gw.child, '"config reloaded"', 120_000)
          hup = performance.now()
          g.gw.child.proc.kill('SIGHUP')
        }, RELOAD_AT_MS)
      })
      await reloaded
      return result
    }
    const control = (): Promise<LoadResult> => load(() => undefined)
    const [a, b] = k % 2 === 0 ? [withReload, control] : [control, withReload]
    const first = await a()
    const second = await b()
    const [result, quiet] = k % 2 === 0 ? [first, second] : [second, first]
    if (result.failures + quiet.failures > 0) throw new Error('reload run: failures')
    const done = await reloaded
    // The same stretch of each run, measured from its window's start.
    const from = hup - result.windowStartMs
    const to = done + 1000 - result.windowStartMs
    const stretch =
      (r: LoadResult) =>
      (end: number): boolean =>
        end >= r.windowStartMs + from && end < r.windowStartMs + to
    const held = (kind: ReloadRun['kind'], a: LoadResult, b: LoadResult): ReloadRun => ({
      kind,
      rate,
      reloadMs: done - hup,
      p99DuringMs: percentile(a, 99, stretch(a)),
      maxDuringMs: percentile(a, 100, stretch(a)),
      p99WithoutMs: percentile(b, 99, stretch(b)),
      maxWithoutMs: percentile(b, 100, stretch(b)),
    })
    out.push(held('reload', result, quiet))
    const [x, y] = [await control(), await control()]
    if (x.failures + y.failures > 0) throw new Error('A/A run: failures')
    // Alternating too: a later run of a pair reading worse is the machine's drift, not a side's.
    out.push(k % 2 === 0 ? held('none', x, y) : held('none', y, x))
  }
  return out
}

/** The p99 ratios of the reloads and of the A/A pairs: medians and ranges, in one line. */
function reloadSummary(runs: readonly ReloadRun[]): string[] {
  if (runs.length === 0) return []
  const ratios = (kind: ReloadRun['kind']): number[] =>
    runs.filter((r) => r.kind === kind).map((r) => r.p99DuringMs / r.p99WithoutMs)
  const line = (xs: number[]): string =>
    `median ${f(spread(xs).median, 2)} (${f(Math.min(...xs), 2)}–${f(Math.max(...xs), 2)}, ${xs.length})`
  return [
    `p99 ÷ p99 of its control: reloads ${line(ratios('reload'))}; A/A pairs, nothing reloaded, ${line(ratios('none'))}.`,
    '',
  ]
}

/** Starts scale-backend.ts pinned beside the load. */
async function startScaleBackend(): Promise<string> {
  const script = join(repoRoot, 'bench', 'scale-backend.ts')
  const child = spawnNode(
    'scale-backend',
    ['--import', 'tsx', script, '--port', '0', '--lifeline'],
    {
      cpu: BACKEND_CPU,
      cwd: repoRoot,
    },
  )
  const match = await waitForLine(child, /listening (\d+)/, 20_000)
  return `http://127.0.0.1:${match[1] ?? ''}`
}

const f = (x: number, digits = 0): string => (Number.isNaN(x) ? '–' : x.toFixed(digits))
const ratio = (x: number, base: number | undefined): string => f(x / (base ?? Number.NaN), 2)

/** A markdown section: a title, a table head and one row per point; nothing without points. */
function section(title: string, head: string, rows: readonly string[]): string[] {
  if (rows.length === 0) return []
  const columns = head.split('|').length - 2
  return [`### ${title}`, '', head, `|${'---:|'.repeat(columns)}`, ...rows, '']
}

function report(
  inproc: RulePoint[],
  outside: OutsideRulePoint[],
  gaps: ReloadGaps[],
  reloads: ReloadRun[],
  lists: ListPoint[],
  fleet: FleetReport,
): string {
  const r0 = inproc[0]
  const o0 = outside[0]
  const l0 = lists[0]
  const lines = [
    ...section(
      'Rules, in process',
      '| rules | load ms | of it compile + index ms | heap per rule | check ns | ÷ 1 rule | list view (60 tools) ns | ÷ 1 rule |',
      inproc.map(
        (p) =>
          `| ${p.rules} | ${f(p.loadMs)} | ${f(p.compileMs)} | ${f(p.heapPerRule)} B | ${f(p.checkNs)} | ${ratio(p.checkNs, r0?.checkNs)} | ${f(p.listNs)} | ${ratio(p.listNs, r0?.listNs)} |`,
      ),
    ),
    ...section(
      'Rules, the built gateway from outside',
      '| rules | serving after ms | RSS at start MB | RSS after load MB | CPU µs per call (median / least) | ÷ 1 rule (median / least) |',
      outside.map(
        (p) =>
          `| ${p.rules} | ${f(p.startMs)} | ${f(p.rssAtStartMb, 1)} | ${f(p.rssAfterLoadMb, 1)} | ${f(p.cpuUs.median)} / ${f(p.cpuUs.least)} | ${ratio(p.cpuUs.median, o0?.cpuUs.median)} / ${ratio(p.cpuUs.least, o0?.cpuUs.least)} |`,
      ),
    ),
    ...section(
      'Reload of the 10,000-rule policy, in process: the event loop meanwhile',
      '| run | held on this thread ms | edit of one rule: beside ms | longest tick gap ms | p99 gap ms | every rule compiled anew: beside ms | longest ms | p99 ms | idle: longest ms | idle: p99 ms |',
      gaps.map(
        (g, i) =>
          `| ${i + 1} | ${f(g.heldMs)} | ${f(g.besideMs)} | ${f(g.longestGapMs, 1)} | ${f(g.p99GapMs, 1)} | ${f(g.freshMs)} | ${f(g.freshLongestGapMs, 1)} | ${f(g.freshP99GapMs, 1)} | ${f(g.idleLongestGapMs, 1)} | ${f(g.idleP99GapMs, 1)} |`,
      ),
    ),
    ...section(
      'Reload of the 10,000-rule policy under load (open loop)',
      '| run | requests/s | reload ms | p99 during ms | p99 without ms | ÷ | max during ms | max without ms |',
      reloads.map(
        (r, i) =>
          `| ${(i >> 1) + 1}${r.kind === 'none' ? ' A/A' : ''} | ${r.rate} | ${f(r.reloadMs)} | ${f(r.p99DuringMs, 2)} | ${f(r.p99WithoutMs, 2)} | ${ratio(r.p99DuringMs, r.p99WithoutMs)} | ${f(r.maxDuringMs, 1)} | ${f(r.maxWithoutMs, 1)} |`,
      ),
    ),
    ...reloadSummary(reloads),
    ...section(
      'Tools per list, in process (20 rules)',
      '| tools | answer bytes | filter ns per tool | ÷ 60 | answer check ns per tool | ÷ 60 |',
      lists.map(
        (p) =>
          `| ${p.tools} | ${p.bytes} | ${f(p.filterNsPerTool)} | ${ratio(p.filterNsPerTool, l0?.filterNsPerTool)} | ${f(p.checkNsPerTool)} | ${ratio(p.checkNsPerTool, l0?.checkNsPerTool)} |`,
      ),
    ),
    ...fleet.lines,
  ]
  return `${lines.join('\n')}\n`
}

async function main(): Promise<number> {
  if (!hasProcStat()) throw new Error('bench:scale needs Linux /proc/<pid>/stat for CPU accounting')
  const started = Date.now()
  // In process first, before any child shares the machine with this process.
  const inproc = wanted('rules') ? ruleCurve(RULES, QUICK ? 3 : 9) : []
  const lists = wanted('lists') ? listCurve(TOOLS, QUICK ? 3 : 9) : []
  const gaps = wanted('reload') ? [await reloadGaps(10_000), await reloadGaps(10_000)] : []
  // The rest of this process is the load: beside the backend.
  if (hasTaskset) spawnSync('taskset', ['-apc', String(BACKEND_CPU), String(process.pid)])
  const configDir = mkdtempSync(join(tmpdir(), 'mcp-edge-scale-'))
  process.once('exit', () => rmSync(configDir, { recursive: true, force: true }))
  const s: Scale = {
    repoRoot,
    configDir,
    backend: await startScaleBackend(),
    clkTck: clockTicksPerSecond(),
    rounds: ROUNDS,
    windowMs: WINDOW_MS,
    warmupMs: WARMUP_MS,
    gatewayCpu: GATEWAY_CPU,
  }
  let points: OutsideRulePoint[] = []
  let reloads: ReloadRun[] = []
  // Started before this process yields: a child inherits its nice value, and a gateway's policy
  // reader yields to the serving thread only by a lower priority than the gateway's own.
  const ruleGateways = wanted('rules') || wanted('reload') ? await startRuleGateways(s) : []
  // The load yields to the backend it shares a core with (the gateways of the other curves,
  // started from here on, run at this nice value too: alone on their core, it changes nothing).
  setPriority(10)
  if (ruleGateways.length > 0) {
    const outside = await rulesOutside(s, ruleGateways)
    points = outside.points
    const bigRps = points[points.length - 1]?.rps ?? 1000
    if (wanted('reload')) reloads = await reloadUnderLoad(s, outside.big, bigRps, RELOADS)
    await stop(outside.big.gw)
  }
  const fleet = await fleetCurves(s, wanted('members'), wanted('servers'))
  const text = report(inproc, points, gaps, reloads, lists, fleet)
  const dir = join(repoRoot, 'bench', 'results')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'scale.md'), text)
  writeFileSync(
    join(dir, 'scale.json'),
    `${JSON.stringify({ inproc, outside: points, gaps, reloads, lists, fleet: fleet.json }, null, 2)}\n`,
  )
  process.stdout.write(text)
  process.stdout.write(
    `\n(${((Date.now() - started) / 1000).toFixed(0)} s; ${sunk() > 0 ? 'ok' : ''})\n`,
  )
  return 0
}

runScript('bench:scale', main)
