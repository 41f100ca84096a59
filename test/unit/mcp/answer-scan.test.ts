import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  AnswerScan,
  answerProblem,
  eventProblem,
  requestIdOf,
  scanAnswerText,
  type AnswerShape,
} from '../../../src/mcp/answer-scan.js'
import { findTopLevelId } from '../../../src/mcp/raw-id.js'

function scanChunks(chunks: readonly Buffer[]): AnswerShape {
  const s = new AnswerScan()
  for (const c of chunks) s.push(c)
  return s.end()
}

/** Counts every object member, duplicates included, by a reader that keeps them all. */
function membersOf(v: unknown): number {
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + membersOf(x), 0)
  if (typeof v !== 'object' || v === null) return 0
  return Object.values(v).reduce((n: number, x) => n + 1 + membersOf(x), 0)
}

const id = fc.oneof(
  fc.integer().map(String),
  fc.string().map((s) => JSON.stringify(s)),
  fc.constant('12345678901234567890'),
  fc.constant('"\\u0061\\"\\\\"'),
)
const value = fc.jsonValue({ maxDepth: 4 })
const answer = fc.record(
  {
    jsonrpc: fc.constant('2.0'),
    id,
    result: value,
    error: fc.record({ code: fc.integer(), message: fc.string() }),
    method: fc.string(),
  },
  { requiredKeys: ['id'] },
)

describe('AnswerScan', () => {
  it('agrees with JSON.parse and findTopLevelId on any answer, however the bytes are cut', () => {
    fc.assert(
      fc.property(answer, fc.array(fc.nat(), { maxLength: 6 }), fc.boolean(), (a, cuts, pad) => {
        const { id: rawId, ...rest } = a
        const inner = JSON.stringify(rest, null, pad ? 1 : undefined)
        const text = inner === '{}' ? `{"id":${rawId}}` : `{${inner.slice(1, -1)},"id":${rawId}}`
        const bytes = Buffer.from(pad ? ` ${text}\n` : text)
        const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((x, y) => x - y)
        const chunks: Buffer[] = []
        let from = 0
        for (const c of at) {
          chunks.push(bytes.subarray(from, c))
          from = c
        }
        chunks.push(bytes.subarray(from))
        const shape = scanChunks(chunks)
        const parsed = JSON.parse(text) as Record<string, unknown>
        expect(shape.object).toBe(true)
        expect(shape.escapedKey).toBe(false)
        expect(shape.response).toBe('result' in parsed || 'error' in parsed)
        expect(shape.error).toBe('error' in parsed)
        expect(shape.answers).toBe(Number('result' in parsed) + Number('error' in parsed))
        expect(shape.rawId).toBe(findTopLevelId(text))
        expect(shape.members).toBe(membersOf(parsed))
      }),
      { numRuns: 400 },
    )
  })

  it.each([
    ['<html>error</html>', false],
    ['', false],
    ['{"id":1,"result":{}} {"id":2}', false],
    ['{"id":1,"result":{}', false],
    ['{"id":1,"result":{},}', false],
    ['{"id":1,,"result":{}}', false],
    ['[{"id":1,"result":{}}]', false],
    ['{"id":1,"result":"a\\"}"}', true],
    ['{}', true],
  ])('%j is one object: %s', (text, object) => {
    expect(scanAnswerText(text).object).toBe(object)
  })

  it('refuses a top-level key written with an escape, and a repeated id', () => {
    const escaped = scanAnswerText('{"\\u0069d":2,"id":1,"result":{}}')
    expect(escaped.escapedKey).toBe(true)
    expect(answerProblem(escaped, '1', 200)).toBe('upstream_unreadable')
    expect(scanAnswerText('{"id":1,"id":2,"result":{}}').rawId).toBeUndefined()
  })

  it('counts a key written twice as one member more than a parser keeps', () => {
    const text = '{"id":1,"result":{"tools":[{"name":"a","name":"b"}]}}'
    expect(scanAnswerText(text).members).toBe(membersOf(JSON.parse(text)) + 1)
  })

  it('carries a backslash at a chunk boundary into the next chunk', () => {
    const text = '{"result":{"t":"x\\"y"},"id":7}'
    for (let i = 0; i <= text.length; i++) {
      const b = Buffer.from(text)
      expect(scanChunks([b.subarray(0, i), b.subarray(i)]).rawId).toBe('7')
    }
  })

  it('reads a request id off a body it does not decode', () => {
    expect(requestIdOf(Buffer.from('{"jsonrpc":"2.0","method":"x","id":"a"}'))).toBe('"a"')
    expect(requestIdOf(Buffer.from('{"jsonrpc":"2.0","method":"x"}'))).toBeUndefined()
    expect(requestIdOf(Buffer.from('[{"id":1}]'))).toBeUndefined()
  })
})

describe('answerProblem', () => {
  const ok = scanAnswerText('{"jsonrpc":"2.0","id":1,"result":{}}')
  const other = scanAnswerText('{"jsonrpc":"2.0","id":2,"result":{}}')
  const nullError = scanAnswerText('{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}')
  const page = scanAnswerText('<html>')
  const notRpc = scanAnswerText('{"detail":"Not Found"}')
  const both = scanAnswerText('{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1}}')
  const nullBoth = scanAnswerText('{"jsonrpc":"2.0","id":null,"error":{"code":1},"result":{}}')
  const twice = scanAnswerText('{"jsonrpc":"2.0","id":1,"result":{},"result":{"x":1}}')

  it.each([
    ['the answer', ok, '1', 200, undefined],
    ['another id', other, '1', 200, 'upstream_id_mismatch'],
    ['another id on a 4xx', other, '1', 400, 'upstream_id_mismatch'],
    ['an error with id null', nullError, '1', 400, undefined],
    ['an error with id null on a 200', nullError, '1', 200, undefined],
    ['an HTML page on a 200', page, '1', 200, 'upstream_unreadable'],
    ['an HTML page on a 404', page, '1', 404, undefined],
    ['a JSON body that is no JSON-RPC on a 200', notRpc, '1', 200, 'upstream_unreadable'],
    ['a JSON body that is no JSON-RPC on a 404', notRpc, '1', 404, undefined],
    ['a response to a notification', ok, null, 200, 'upstream_id_mismatch'],
    ['a GET stream: nothing expected', other, undefined, 200, undefined],
    // JSON-RPC 2.0 §5: exactly one of result and error, on any status.
    ['a result and an error', both, '1', 200, 'upstream_unreadable'],
    ['a result and an error on a 5xx', both, '1', 500, 'upstream_unreadable'],
    ['a result and an error with id null', nullBoth, '1', 400, 'upstream_unreadable'],
    ['a result written twice', twice, '1', 200, 'upstream_unreadable'],
  ] as const)('%s', (_name, shape, expected, status, problem) => {
    expect(answerProblem(shape, expected, status)).toBe(problem)
  })

  it('in a stream, only responses are tied to the request; data that is no object ends it', () => {
    const note = scanAnswerText('{"jsonrpc":"2.0","method":"notifications/progress"}')
    expect(eventProblem(note, '1')).toBeUndefined()
    expect(eventProblem(other, '1')).toBe('upstream_id_mismatch')
    expect(eventProblem(scanAnswerText('{"id":1,"result":'), '1')).toBe('upstream_unreadable')
    expect(eventProblem(both, '1')).toBe('upstream_unreadable')
    expect(eventProblem(both, undefined)).toBe('upstream_unreadable')
    expect(eventProblem(twice, '1')).toBe('upstream_unreadable')
  })
})
