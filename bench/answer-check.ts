/**
 * What the answer check costs one forwarded call (docs/security.md "What the gateway relays"):
 * reading the request's id off the body forwarded unparsed, and scanning the bench backend's own
 * answers (a 1 KB tools/call result, the tools/list page) as they pass, against relaying the same
 * chunks unchecked. In process, many short alternating rounds; the figure is the least time per call
 * over the rounds (the median beside it), since on a shared machine interference only ever adds
 * time. Run: `npm run bench:answer`. Targets: at most 3 µs per forwarded call, at most 1 ns per
 * answer byte for the scan.
 */
import { JsonPass } from '../src/mcp/json-answer.js'
import { requestIdOf } from '../src/mcp/answer-scan.js'
import { CALL_RESULT_TAIL, LIST_RESULT_TAIL, withId } from './fixtures.js'
import { buildRequest } from './requests.js'

/** Rounds per figure: many short ones, so some run undisturbed on a shared machine. */
const ROUNDS = Number(process.env['BENCH_ANSWER_ROUNDS'] ?? 200)
/** Each round lasts about this long (ms), whatever the answer's size. */
const ROUND_MS = 4

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

/** What a forwarded call's check does: the request's id, then the answer scanned as it passes. */
function checked(c: Case): void {
  const expected = requestIdOf(c.request) ?? null
  scanned(c, expected)
}

function scanned(c: Case, expected: string | null = '1'): void {
  const t = new JsonPass(expected, 200)
  const held = t.push(c.answer)
  const out = t.end()
  sink += (held?.length ?? 0) + (out?.length ?? 0)
}

function unchecked(c: Case): void {
  // What the dispatch did before: the chunk relayed as it came.
  sink += c.answer.length
}

/** ns per call of `fn`, one round. */
function time(fn: (c: Case) => void, c: Case, calls: number): number {
  const start = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) fn(c)
  return Number(process.hrtime.bigint() - start) / calls
}

interface Figure {
  readonly least: number
  readonly median: number
}

/** Least and median ns per call over the rounds, against `base` timed in the same rounds. */
function measure(fn: (c: Case) => void, base: (c: Case) => void, c: Case, calls: number): Figure {
  const a: number[] = []
  const b: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    a.push(time(fn, c, calls))
    b.push(time(base, c, calls))
  }
  a.sort((x, y) => x - y)
  b.sort((x, y) => x - y)
  const mid = Math.floor(ROUNDS / 2)
  return {
    least: (a[0] as number) - (b[0] as number),
    median: (a[mid] as number) - (b[mid] as number),
  }
}

const rows: string[] = []
for (const c of cases) {
  // As many calls per round as take ROUND_MS, from a first estimate.
  for (let i = 0; i < 20; i++) time(checked, c, 100)
  const calls = Math.max(10, Math.round((ROUND_MS * 1e6) / time(checked, c, 200)))
  const call = measure(checked, unchecked, c, calls)
  const scan = measure(scanned, unchecked, c, calls)
  const perByte = scan.least / c.answer.length
  rows.push(
    `| ${c.name} | ${c.request.length} B | ${c.answer.length} B | ${(call.least / 1000).toFixed(2)} µs (median ${(call.median / 1000).toFixed(2)}) | ${perByte.toFixed(2)} ns (median ${(scan.median / c.answer.length).toFixed(2)}) | ${(c.name !== 'tools/call' || call.least <= 3000) && perByte <= 1 ? 'ok' : 'over'} |`,
  )
}
console.log(
  '| call | request | answer | check per call | answer scan per byte | targets: ≤ 3 µs a tools/call, ≤ 1 ns a byte |',
)
console.log('|---|---|---|---|---|---|')
for (const r of rows) console.log(r)
if (sink === 0) console.log('')
