import { describe, expect, it } from 'vitest'
import { resultTransform, type ResultHook } from '../../../src/mcp/result-transform.js'
import { UpstreamFailure } from '../../../src/upstream/forward.js'

const BIG = '{"result":{"tools":[{"name":"a"},{"name":"b"}]},"jsonrpc":"2.0","id":12345678901234567890}'
const dropB: ResultHook = (m) => ({ ...m, result: { tools: [{ name: 'a' }] } })

function run(t: ReturnType<typeof resultTransform>, chunks: string[]): string {
  if (t === undefined) throw new Error('no transform')
  let out = ''
  for (const c of chunks) out += t.push(Buffer.from(c))?.toString() ?? ''
  return out + (t.end()?.toString() ?? '')
}

describe('resultTransform', () => {
  it('rewrites a JSON answer and keeps a big integer id byte for byte', () => {
    const out = run(resultTransform('application/json', 1 << 20, [dropB]), [BIG.slice(0, 30), BIG.slice(30)])
    expect(out).toBe('{"id":12345678901234567890,"result":{"tools":[{"name":"a"}]},"jsonrpc":"2.0"}')
  })

  it('rewrites only the response event of an SSE stream, keeping the id', () => {
    const progress = 'event: message\ndata: {"method":"notifications/progress","params":{}}\n\n'
    const t = resultTransform('text/event-stream', 1 << 20, [dropB])
    const out = run(t, [progress, `event: message\ndata: ${BIG}\n\n`])
    expect(out).toBe(`${progress}event: message\ndata: {"id":12345678901234567890,"result":{"tools":[{"name":"a"}]},"jsonrpc":"2.0"}\n\n`)
  })

  it('refuses an answer too large to rewrite (never passes it unfiltered)', () => {
    const t = resultTransform('application/json', 10, [dropB])
    expect(() => run(t, [BIG])).toThrow(UpstreamFailure)
  })

  it('observe mode streams chunks through untouched and still shows the hooks the answer', () => {
    const seen: unknown[] = []
    const t = resultTransform('application/json', 1 << 20, [(m) => void seen.push(m.result)], 'observe')
    expect(t?.streaming).toBe(true)
    expect(t?.push(Buffer.from(BIG))?.toString()).toBe(BIG)
    expect(t?.end()).toBeUndefined()
    expect(seen).toEqual([{ tools: [{ name: 'a' }, { name: 'b' }] }])
  })

  it('observe mode relays what is too large to look at, without observing it', () => {
    const seen: unknown[] = []
    const hook: ResultHook = (m) => void seen.push(m)
    expect(run(resultTransform('application/json', 10, [hook], 'observe'), [BIG])).toBe(BIG)
    const sse = `event: message\ndata: ${BIG}\n\n`
    expect(run(resultTransform('text/event-stream', 10, [hook], 'observe'), [sse.slice(0, 40), sse.slice(40)])).toBe(sse)
    expect(seen).toEqual([])
  })
})
