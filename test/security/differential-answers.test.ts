import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../src/errors.js'
import { listFilterHook, type ListFilter } from '../../src/mcp/list-filter.js'
import { resultTransform, type HookMode } from '../../src/mcp/result-transform.js'
import { parseJson, type JsonNode } from '../helpers/readers.js'

/**
 * The answer side of the differential property (docs/security.md "What the gateway relays"):
 * for every answer the gateway delivers, every way a client reads it (first key wins, last key
 * wins, Go's case-insensitive keys, Python's reader that takes `NaN`) finds the request's id, and,
 * where the gateway filters, only names the filter allowed. Answers are generated adversarially:
 * duplicate and case-variant keys, escaped keys, `NaN`, other ids, trailing data, batches, cut at
 * random points, as JSON or as an SSE stream. The readings are of the bytes the client gets from
 * the gateway's one answer reader (mcp/result-transform.ts).
 */

const SEED = Number(process.env.MCP_EDGE_DIFF_SEED ?? 20261201)
const RUNS = Number(process.env.MCP_EDGE_DIFF_RUNS ?? 1500)
const REQUEST_ID = '"r-1"'
const ALLOWED = new Set(['echo', 'search'])

const filter: ListFilter = {
  key: 'test',
  identityDependent: false,
  apply: (_method, result) => ({
    ...result,
    tools: (result['tools'] as { name?: unknown }[]).filter(
      (t) => typeof t.name === 'string' && ALLOWED.has(t.name),
    ),
  }),
}

type Rule = 'first' | 'last' | 'fold'
const RULES: readonly Rule[] = ['first', 'last', 'fold']

/** The member a reader with this rule takes for `key`. */
function member(node: JsonNode | undefined, key: string, rule: Rule): JsonNode | undefined {
  if (node?.t !== 'obj') return undefined
  const hits = node.members.filter((m) =>
    rule === 'fold' ? m.key.toLowerCase() === key : m.key === key,
  )
  return (rule === 'first' ? hits[0] : hits.at(-1))?.value
}

interface Reading {
  readonly id: string | undefined
  readonly names: readonly string[]
  readonly response: boolean
}

function idText(node: JsonNode | undefined): string | undefined {
  if (node?.t === 'num') return node.raw
  if (node?.t === 'str') return JSON.stringify(node.v)
  return undefined
}

/** How a client with `rule` reads one message; Python's reader also takes NaN and Infinity. */
function read(text: string, rule: Rule, python: boolean): Reading | undefined {
  let node: JsonNode
  try {
    node = parseJson(python ? text.replace(/-?\b(?:NaN|Infinity)\b/g, '0') : text)
  } catch {
    return undefined // this client cannot read it at all: it takes nothing from it
  }
  const result = member(node, 'result', rule)
  const error = member(node, 'error', rule)
  const tools = member(result, 'tools', rule)
  const names =
    tools?.t === 'arr'
      ? tools.items.flatMap((t) => {
          const n = member(t, 'name', rule)
          return n?.t === 'str' ? [n.v] : []
        })
      : []
  return {
    id: idText(member(node, 'id', rule)),
    names,
    response: result !== undefined || error !== undefined,
  }
}

/** Every message a client reads from what the gateway delivered. */
function messages(delivered: string, sse: boolean): string[] {
  if (!sse) return [delivered]
  return delivered
    .split(/\n\n/)
    .map((e) =>
      e
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
        .join('\n'),
    )
    .filter((d) => d.length > 0)
}

// --- generators -----------------------------------------------------------------------------

const name = fc.constantFrom('echo', 'search', 'delete_repo', 'get_secret')
const item = fc
  .tuple(fc.constantFrom('plain', 'twice', 'case', 'escaped', 'nan'), name, name)
  .map(([how, a, b]) => {
    switch (how) {
      case 'twice':
        return `{"name":"${a}","name":"${b}"}`
      case 'case':
        return `{"name":"${a}","Name":"${b}"}`
      case 'escaped':
        return `{"n\\u0061me":"${a}"}`
      case 'nan':
        return `{"name":"${a}","x":NaN}`
      default:
        return `{"name":"${a}"}`
    }
  })
const answer = fc
  .record({
    items: fc.array(item, { maxLength: 4 }),
    id: fc.constantFrom(REQUEST_ID, REQUEST_ID, '"r-2"', '7', 'null'),
    idFirst: fc.boolean(),
    keyEscape: fc.boolean(),
    tail: fc.constantFrom(
      '',
      '',
      '',
      ' {"id":"r-1","result":{"tools":[{"name":"delete_repo"}]}}',
      'x',
    ),
    batch: fc.boolean(),
  })
  .map((a) => {
    const body = `"result":{"tools":[${a.items.join(',')}]}`
    const id = `"${a.keyEscape ? '\\u0069d' : 'id'}":${a.id}`
    const text = a.idFirst
      ? `{"jsonrpc":"2.0",${id},${body}}${a.tail}`
      : `{"jsonrpc":"2.0",${body},${id}}${a.tail}`
    return a.batch ? `[${text}]` : text
  })

function run(
  text: string,
  sse: boolean,
  mode: HookMode,
  cuts: readonly number[],
): string | undefined {
  const type = sse ? 'text/event-stream' : 'application/json'
  const hooks = mode === 'pass' ? [] : [listFilterHook(filter, 'tools/list')]
  const t = resultTransform(type, 1 << 20, hooks, mode, REQUEST_ID, 200)
  if (t === undefined) throw new Error('no reader')
  const bytes = Buffer.from(sse ? `event: message\ndata: ${text}\n\n` : text)
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((x, y) => x - y)
  const out: Buffer[] = []
  let from = 0
  try {
    for (const c of [...at, bytes.length]) {
      const o = t.push(bytes.subarray(from, c))
      if (o !== undefined) out.push(o)
      from = c
    }
    const last = t.end()
    if (last !== undefined) out.push(last)
  } catch (err) {
    if (err instanceof GatewayError) return undefined // refused: the client gets the gateway's 502
    throw err
  }
  return Buffer.concat(out).toString('utf8')
}

describe('differential: what clients read of a delivered answer', () => {
  it.each([
    ['JSON', 'rewrite', false],
    ['SSE', 'rewrite', true],
    ['JSON', 'observe', false],
    ['SSE', 'observe', true],
    ['JSON', 'pass', false],
    ['SSE', 'pass', true],
  ] as const)(
    '%s, %s mode: every reader finds this request’s id, and only allowed names',
    (_t, mode, sse) => {
      fc.assert(
        fc.property(answer, fc.array(fc.nat(), { maxLength: 4 }), (text, cuts) => {
          const delivered = run(text, sse, mode, cuts)
          if (delivered === undefined) return
          for (const msg of messages(delivered, sse)) {
            for (const rule of RULES) {
              for (const python of [false, true]) {
                const r = read(msg, rule, python)
                if (r === undefined || !r.response) continue
                // a gateway error in place of the answer carries the request's id as well
                expect(r.id, `${rule}/${python} read no id: ${msg}`).toBe(REQUEST_ID)
                if (mode === 'rewrite')
                  for (const n of r.names)
                    expect(ALLOWED.has(n), `${rule}/${python}: ${msg}`).toBe(true)
              }
            }
          }
        }),
        { seed: SEED, numRuns: RUNS },
      )
    },
  )
})
