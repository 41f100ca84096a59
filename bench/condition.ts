/**
 * What a policy condition costs one call (docs/policy.md §Conditions): PolicySet.check of a
 * tools/call whose rule has the example `if:` (a comparison and an RE2 `matches`), against the same
 * rule without it, same arguments, same run. In process, alternating rounds, median CPU time per call,
 * so the figure holds on a busy machine. Run: `npm run bench:condition`. Target: at most 10 µs more.
 */
import { parse } from 'yaml'
import type { PolicyCaller } from '../src/match/claims.js'
import type { McpTarget } from '../src/mcp/classify.js'
import { compileRule } from '../src/policy/compile.js'
import { PolicySet } from '../src/policy/policy.js'
import { policyFileSchema } from '../src/policy/schema.js'

const CALLS = Number(process.env['BENCH_CONDITION_CALLS'] ?? 50_000)
const ROUNDS = Number(process.env['BENCH_CONDITION_ROUNDS'] ?? 15)

const RULE = String.raw`
  - name: analysts-query-analytics
    when: { claims: { groups: analysts } }
    servers: [warehouse]
    allow:
      tools: ["run_query"]`
const CONDITION = String.raw`
    if: 'args.database == "analytics" && !args.sql.matches("(?i)\\b(drop|delete|update)\\b")'`

function policyOf(yaml: string): PolicySet {
  const file = policyFileSchema.parse(parse(yaml))
  const rules = (file.rules ?? []).map((rule, i) => compileRule({ rule, source: `rules[${i}]` }))
  return new PolicySet(rules, 'enforce', 'bench', ['warehouse'])
}

const withCondition = policyOf(`rules:${RULE}${CONDITION}`)
const without = policyOf(`rules:${RULE}`)
const caller: PolicyCaller = {
  subject: 'ann',
  issuer: 'https://idp.example.com',
  claims: { sub: 'ann', iss: 'https://idp.example.com', groups: ['analysts'], azp: 'bi-tool' },
}
const target: McpTarget = { kind: 'tool', name: 'run_query' }
const args = {
  database: 'analytics',
  sql: "select day, count(*) from events where day >= '2026-11-01' group by day order by day",
}

let sink = 0

/** CPU (user + system) per call in ns: on a shared machine wall time counts other processes. */
function time(policy: PolicySet): number {
  const start = process.cpuUsage()
  for (let i = 0; i < CALLS; i++) if (policy.check(caller, 'warehouse', target, args).allow) sink++
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1000) / CALLS
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

// SECURITY of the figure: both must allow, or the bench times a shortcut.
if (!withCondition.check(caller, 'warehouse', target, args).allow) throw new Error('not allowed')
for (let i = 0; i < 3; i++) {
  time(withCondition)
  time(without)
}
const a: number[] = []
const b: number[] = []
for (let r = 0; r < ROUNDS; r++) {
  a.push(time(withCondition))
  b.push(time(without))
}
const cost = median(a) - median(b)
console.log('| rule | check per call | with the condition | condition per call | target ≤ 10 µs |')
console.log('|---|---|---|---|---|')
console.log(
  `| run_query, \`if:\` comparison + RE2 matches | ${(median(b) / 1000).toFixed(2)} µs | ${(median(a) / 1000).toFixed(2)} µs | ${(cost / 1000).toFixed(2)} µs | ${cost <= 10_000 ? 'ok' : 'over 10 µs'} |`,
)
if (sink === 0) console.log('')
