/**
 * What a policy condition costs one call (docs/policy.md §Conditions): PolicySet.check of a
 * tools/call whose rule has the example `if:` (a comparison and an RE2 `matches`), against the same
 * rule without it, same arguments, same run. In process, alternating rounds, median CPU time per call,
 * so the figure holds on a busy machine. Run: `npm run bench:condition`. Target: at most 10 µs more.
 *
 * Then the key scan of such a server (docs/security.md §What the gateway reads in a body): reading
 * the call's body (mcp/jsonrpc.ts parseMessage) with the keys its conditions read judged, against
 * the same read judging every key's pairs only (what a server with conditions did before), and
 * against the read of a server without conditions. Target: at most 1 µs more per call.
 */
import { parse } from 'yaml'
import type { PolicyCaller } from '../src/match/claims.js'
import type { ArgumentKeys } from '../src/mcp/argument-keys.js'
import type { McpTarget } from '../src/mcp/classify.js'
import { parseMessage } from '../src/mcp/jsonrpc.js'
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

// The key scan: one body, three reads of it.
const mail = String.raw`
  - name: mail-inside-only
    servers: [warehouse]
    deny: { tools: ["send_email"] }
    unless: 'args.to.all(a, a.endsWith("@example.com")) && !has(args.bcc)'`
const keys = policyOf(`rules:${RULE}${CONDITION}${mail}`).argumentKeys('warehouse') as ArgumentKeys
const envelope = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
}
const body = new TextEncoder().encode(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: {
      name: 'run_query',
      arguments: { ...args, limit: 100, format: 'csv' },
      _meta: envelope,
    },
  }),
)
const CT = 'application/json'
const reads = {
  none: () => parseMessage(body, 64, CT),
  pairs: () => parseMessage(body, 64, CT, true),
  keys: () => parseMessage(body, 64, CT, true, keys),
}

function timeRead(read: () => unknown): number {
  const start = process.cpuUsage()
  for (let i = 0; i < CALLS; i++) if (read() !== undefined) sink++
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1000) / CALLS
}

for (let i = 0; i < 3; i++) for (const read of Object.values(reads)) timeRead(read)
// Each round times pairs, keys, pairs again: the scan's cost is the keys read less the mean of
// the two around it, so a change of load within the round cancels out. Three times the rounds
// of the table above: the difference is smaller than its noise on a shared machine.
const samples = { none: [] as number[], pairs: [] as number[], keys: [] as number[] }
const scans: number[] = []
for (let r = 0; r < 3 * ROUNDS; r++) {
  const before = timeRead(reads.pairs)
  const judged = timeRead(reads.keys)
  const after = timeRead(reads.pairs)
  samples.pairs.push(before, after)
  samples.keys.push(judged)
  scans.push(judged - (before + after) / 2)
  samples.none.push(timeRead(reads.none))
}
const [none, pairs, judged] = [median(samples.none), median(samples.pairs), median(samples.keys)]
const scan = median(scans)
console.log('')
console.log(
  `| body of ${body.length} bytes | no conditions | conditions, pairs only | conditions, keys read judged | key scan per call | target ≤ 1 µs |`,
)
console.log('|---|---|---|---|---|---|')
console.log(
  `| run_query, the two conditions above | ${(none / 1000).toFixed(2)} µs | ${(pairs / 1000).toFixed(2)} µs | ${(judged / 1000).toFixed(2)} µs | ${(scan / 1000).toFixed(2)} µs | ${scan <= 1000 ? 'ok' : 'over 1 µs'} |`,
)
if (sink === 0) console.log('')
