/**
 * The in-process curves of `npm run bench:scale` (scale.ts): what the policy and the list path
 * cost as rules and list lengths grow, timed with process.cpuUsage in alternating rounds (medians),
 * so the figures hold on a shared machine where other processes take the cores at will.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { execFile } from 'node:child_process'
import { shippedNodeFlags } from './gateway.js'
import { parse } from 'yaml'
import type { PolicyCaller } from '../src/match/claims.js'
import type { McpTarget } from '../src/mcp/classify.js'
import { JsonPass } from '../src/mcp/json-answer.js'
import { compileRule } from '../src/policy/compile.js'
import { loadPolicySet } from '../src/policy/load.js'
import { PolicySet } from '../src/policy/policy.js'
import { policyFileSchema } from '../src/policy/schema.js'

/**
 * A policy of `n` rules shaped as an organisation's allowlist grows (one rule per team, each
 * allowing its tool family to its group) plus the rule that allows the bench tool to everyone:
 * the caller the bench sends is in no team, so every team rule is one the call does not need.
 */
export function rulesYaml(n: number, server = 'bench'): string {
  const lines = ['rules:']
  for (let i = 1; i < n; i++) {
    lines.push(
      `  - name: team-${i}`,
      `    when: { claims: { groups: team-${i} } }`,
      `    servers: [${server}]`,
      `    allow: { tools: ["t${i}_*", "team${i}_report"] }`,
    )
  }
  lines.push('  - name: everyone', `    servers: [${server}]`, '    allow: { tools: ["get_*"] }')
  return `${lines.join('\n')}\n`
}

/** A temporary policy folder holding `rulesYaml(n)`; removed with `remove()`. */
function policyFolder(n: number, server = 'bench'): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-scale-'))
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'policy.yaml'), rulesYaml(n, server))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

const run = promisify(execFile)

const gc = (globalThis as { gc?: () => void }).gc

function heapUsed(): number {
  gc?.()
  gc?.()
  return process.memoryUsage().heapUsed
}

function cpuNs(fn: () => void, calls: number): number {
  const start = process.cpuUsage()
  for (let i = 0; i < calls; i++) fn()
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1000) / calls
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

let sink = 0

/** One point of the rules curve. */
export interface RulePoint {
  readonly rules: number
  /** loadPolicySet of the folder: read, YAML, schema, compile, index (ms, one load). */
  readonly loadMs: number
  /** Of it, compiling and indexing the parsed rules (ms). */
  readonly compileMs: number
  /** JS heap the loaded policy holds, per rule (bytes). */
  readonly heapPerRule: number
  /** PolicySet.check of the bench call, CPU per call (ns, median over rounds). */
  readonly checkNs: number
  /** listFilter built for the caller plus one 60-tool tools/list filtered, CPU (ns). */
  readonly listNs: number
}

const CALLER: PolicyCaller = {
  subject: 'bench-agent',
  issuer: 'https://issuer.bench.invalid',
  claims: { sub: 'bench-agent', groups: ['bench-users'] },
}
const CALL: McpTarget = { kind: 'tool', name: 'get_forecast' }
const SIXTY = {
  tools: Array.from({ length: 60 }, (_, i) => ({ name: i === 0 ? 'get_forecast' : `tool_${i}` })),
}

/** The rules curve in process: load, memory and decision cost for each rule count. */
export function ruleCurve(points: readonly number[], rounds: number): RulePoint[] {
  const loaded = points.map((n) => {
    const folder = policyFolder(n)
    try {
      const before = heapUsed()
      const t0 = performance.now()
      const policy = loadPolicySet({
        folder: folder.dir,
        label: 'scale',
        mode: 'enforce',
        servers: ['bench'],
      })
      const loadMs = performance.now() - t0
      const heapPerRule = (heapUsed() - before) / n
      const file = policyFileSchema.parse(parse(rulesYaml(n)))
      const t1 = performance.now()
      const rules = (file.rules ?? []).map((rule, i) => compileRule({ rule, source: `r[${i}]` }))
      sink += new PolicySet(rules, 'enforce', 'scale', ['bench']).rules.length
      return { n, policy, loadMs, compileMs: performance.now() - t1, heapPerRule }
    } finally {
      folder.remove()
    }
  })
  const check = (p: PolicySet) => () => {
    if (p.check(CALLER, 'bench', CALL).allow) sink++
  }
  const list = (p: PolicySet) => () => {
    sink += (p.listFilter(CALLER, 'bench')?.apply('tools/list', SIXTY).tools as unknown[]).length
  }
  for (const l of loaded)
    if (!l.policy.check(CALLER, 'bench', CALL).allow) throw new Error('denied')
  const checks = loaded.map(() => [] as number[])
  const lists = loaded.map(() => [] as number[])
  for (let r = 0; r < rounds; r++) {
    // Alternating order, so a change of load on the machine falls on every point alike.
    const order = r % 2 === 0 ? loaded.keys() : [...loaded.keys()].reverse()
    for (const i of order) {
      const l = loaded[i] as (typeof loaded)[number]
      checks[i]?.push(cpuNs(check(l.policy), 20_000))
      lists[i]?.push(cpuNs(list(l.policy), 2_000))
    }
  }
  return loaded.map((l, i) => ({
    rules: l.n,
    loadMs: l.loadMs,
    compileMs: l.compileMs,
    heapPerRule: l.heapPerRule,
    checkNs: median(checks[i] as number[]),
    listNs: median(lists[i] as number[]),
  }))
}

/** One point of the tools-per-list curve: CPU per tool. */
export interface ListPoint {
  readonly tools: number
  readonly bytes: number
  /** The caller's list filter applied to the parsed list (ns per tool). */
  readonly filterNsPerTool: number
  /** The answer check (mcp/json-answer.ts) over the answer's bytes (ns per tool). */
  readonly checkNsPerTool: number
}

/** Twenty rules, as bench/targets.ts's `gateway-auth-policy` has them. */
function twentyRules(): PolicySet {
  const lines = ['rules:']
  for (let i = 0; i < 18; i++)
    lines.push(`  - name: team-${i}`, '    servers: [bench]', `    allow: { tools: ["t${i}_*"] }`)
  lines.push('  - name: no-deletes', '    servers: ["*"]', '    deny: { tools: ["delete_*"] }')
  lines.push('  - name: bench', '    servers: [bench]', '    allow: { tools: ["get_*", "tool_*"] }')
  const file = policyFileSchema.parse(parse(lines.join('\n')))
  const rules = (file.rules ?? []).map((rule, i) => compileRule({ rule, source: `r[${i}]` }))
  return new PolicySet(rules, 'enforce', 'scale', ['bench'])
}

/** The list curve in process: filter and answer check per tool, for each list length. */
export function listCurve(points: readonly number[], rounds: number): ListPoint[] {
  const policy = twentyRules()
  const cases = points.map((n) => {
    const tools = Array.from({ length: n }, (_, i) => ({
      name: i % 10 === 9 ? `delete_${i}` : `tool_${String(i).padStart(4, '0')}`,
      description: `Synthetic tool ${i}, padding the list to a realistic size.`,
      inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
    }))
    const result = { tools, ttlMs: 0, cacheScope: 'private' }
    const answer = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, result }))
    return { n, result, answer }
  })
  const filter = (c: (typeof cases)[number]) => () => {
    const f = policy.listFilter(undefined, 'bench')
    sink += (f?.apply('tools/list', c.result).tools as unknown[]).length
  }
  const check = (c: (typeof cases)[number]) => () => {
    const pass = new JsonPass('1', 200)
    sink += (pass.push(c.answer)?.length ?? 0) + (pass.end()?.length ?? 0)
  }
  const filters = cases.map(() => [] as number[])
  const checks = cases.map(() => [] as number[])
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? cases.keys() : [...cases.keys()].reverse()
    for (const i of order) {
      const c = cases[i] as (typeof cases)[number]
      // About the same number of tools per round at every length.
      const calls = Math.max(1, Math.round(60_000 / c.n))
      filters[i]?.push(cpuNs(filter(c), calls) / c.n)
      checks[i]?.push(cpuNs(check(c), calls) / c.n)
    }
  }
  return cases.map((c, i) => ({
    tools: c.n,
    bytes: c.answer.length,
    filterNsPerTool: median(filters[i] as number[]),
    checkNsPerTool: median(checks[i] as number[]),
  }))
}

/** A reload of `rules` rules beside a running policy, and the event loop meanwhile. */
export interface ReloadGaps {
  readonly rules: number
  /** loadPolicySet on this thread: how long a reload held the event loop before (ms). */
  readonly heldMs: number
  /** loadPolicySetBeside of an edit of one rule, start to swap-ready (ms). */
  readonly besideMs: number
  /** Longest and 99th-percentile gap between 1 ms ticks of a timer meanwhile (ms). */
  readonly longestGapMs: number
  readonly p99GapMs: number
  /** The same with every rule compiled anew (no running policy to take unchanged rules from). */
  readonly freshMs: number
  readonly freshLongestGapMs: number
  readonly freshP99GapMs: number
  /** The same gaps over as long with nothing loading: what this machine's noise alone gives. */
  readonly idleLongestGapMs: number
  readonly idleP99GapMs: number
}

const p99 = (sorted: readonly number[]): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? Number.NaN

/**
 * What a reload does to the thread that serves (docs/policy.md §Hot reload): the event loop's
 * ticks while loadPolicySetBeside reads, compiles and indexes the folder, against the same time
 * with nothing loading, and against the time loadPolicySet holds the loop. Measured in a process
 * of its own that loads policies as the gateway does (reload-gaps.ts): the built loader under
 * the node flags the gateway ships with.
 */
export async function reloadGaps(rules: number): Promise<ReloadGaps> {
  const folder = policyFolder(rules)
  try {
    const root = join(import.meta.dirname, '..')
    const { stdout } = await run(process.execPath, [
      ...shippedNodeFlags(root),
      '--import',
      'tsx',
      join(root, 'bench', 'reload-gaps.ts'),
      folder.dir,
    ])
    const r = JSON.parse(stdout) as {
      heldMs: number
      besideMs: number
      beside: number[]
      idle: number[]
      freshMs: number
      fresh: number[]
    }
    return {
      rules,
      heldMs: r.heldMs,
      besideMs: r.besideMs,
      longestGapMs: r.beside[r.beside.length - 1] ?? Number.NaN,
      p99GapMs: p99(r.beside),
      freshMs: r.freshMs,
      freshLongestGapMs: r.fresh[r.fresh.length - 1] ?? Number.NaN,
      freshP99GapMs: p99(r.fresh),
      idleLongestGapMs: r.idle[r.idle.length - 1] ?? Number.NaN,
      idleP99GapMs: p99(r.idle),
    }
  } finally {
    folder.remove()
  }
}

/** Keeps the timed results observable, so no round is optimised away. */
export function sunk(): number {
  return sink
}
