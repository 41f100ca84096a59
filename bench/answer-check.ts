/**
 * What the answer check costs one forwarded call (docs/security.md "What the gateway relays"):
 * reading the request's id off the body forwarded unparsed, and scanning the bench backend's own
 * answers (a 1 KB tools/call result, the tools/list page) as they pass, against relaying the same
 * chunks unchecked. In process, alternating rounds, median per call, so the figure holds on a busy
 * machine. Run: `npm run bench:answer`. Target: at most 3 µs per forwarded call.
 */
import { JsonPass } from '../src/mcp/json-answer.js'
import { requestIdOf } from '../src/mcp/answer-scan.js'
import { CALL_RESULT_TAIL, LIST_RESULT_TAIL, withId } from './fixtures.js'
import { buildRequest } from './requests.js'

const CALLS = Number(process.env['BENCH_ANSWER_CALLS'] ?? 100_000)
const ROUNDS = Number(process.env['BENCH_ANSWER_ROUNDS'] ?? 15)

interface Case {
  readonly name: string
  readonly request: Buffer
  readonly answer: Buffer
}

const cases: readonly Case[] = (['tools/call', 'tools/list'] as const).map((method) => {
  const req = buildRequest(method, 1)
  return {
    name: method,
    request: Buffer.from(typeof req.body === 'string' ? req.body : JSON.stringify(req.body)),
    answer: Buffer.from(withId(1, method === 'tools/call' ? CALL_RESULT_TAIL : LIST_RESULT_TAIL)),
  }
})

let sink = 0

function checked(c: Case): void {
  const expected = requestIdOf(c.request) ?? null
  const t = new JsonPass(expected, 200)
  const held = t.push(c.answer)
  const out = t.end()
  sink += (held?.length ?? 0) + (out?.length ?? 0)
}

function unchecked(c: Case): void {
  // What the dispatch did before: the chunk relayed as it came.
  sink += c.answer.length
}

function time(fn: (c: Case) => void, c: Case): number {
  const start = process.hrtime.bigint()
  for (let i = 0; i < CALLS; i++) fn(c)
  return Number(process.hrtime.bigint() - start) / CALLS
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

const rows: string[] = []
for (const c of cases) {
  for (let i = 0; i < 3; i++) {
    time(checked, c)
    time(unchecked, c)
  }
  const a: number[] = []
  const b: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    a.push(time(checked, c))
    b.push(time(unchecked, c))
  }
  const cost = median(a) - median(b)
  rows.push(
    `| ${c.name} | ${c.request.length} B | ${c.answer.length} B | ${(cost / 1000).toFixed(2)} µs | ${cost <= 3000 ? 'ok' : 'over 3 µs'} |`,
  )
}
console.log('| call | request | answer | check per call | target ≤ 3 µs |')
console.log('|---|---|---|---|---|')
for (const r of rows) console.log(r)
if (sink === 0) console.log('')
