import { describe, expect, it } from 'vitest'
import { SseAnswer } from '../../../src/mcp/sse-answer.js'

/** The reader every SSE answer without hooks gets: framing and the id check. */
function pass(expected: string | null | undefined = '1'): SseAnswer {
  return new SseAnswer(1 << 20, [], 'pass', expected)
}

const progress =
  'event: message\ndata: {"method":"notifications/progress","params":{"progress":1}}\n\n'
const result = 'event: message\ndata: {"result":{"content":[]},"jsonrpc":"2.0","id":1}\n\n'

describe('SseAnswer (pass)', () => {
  it('passes whole events through untouched and without copying', () => {
    const f = pass()
    const chunk = Buffer.from(progress)
    expect(f.push(chunk)).toBe(chunk)
    expect(f.answered).toBe(false)
    expect(f.push(Buffer.from(': keepalive\n\n'))?.toString()).toBe(': keepalive\n\n')
  })

  it('holds back a partial event until its blank line arrives', () => {
    const f = pass()
    expect(f.push(Buffer.from(progress + result.slice(0, 20)))?.toString()).toBe(progress)
    expect(f.push(Buffer.from(result.slice(20)))?.toString()).toBe(result)
    expect(f.answered).toBe(true)
  })

  it('understands CRLF and CR line endings', () => {
    const f = pass('2')
    expect(
      f.push(Buffer.from('data: {"jsonrpc":"2.0","id":2,"error":{"code":1}}\r\n\r\n'))?.toString(),
    ).toContain('"error"')
    expect(f.answered).toBe(true)
    expect(pass().push(Buffer.from('data: x\r\r'))?.toString()).toBe('data: x\r\r')
  })

  it('does not count notifications or nested "result" keys as the response', () => {
    const f = pass()
    f.push(
      Buffer.from(
        'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"result":1}}\n\n',
      ),
    )
    expect(f.answered).toBe(false)
  })
})

describe('SseFramer on the shared reader', () => {
  it('ends an event at the LF CRLF blank line form', () => {
    const f = pass()
    expect(
      f.push(Buffer.from('data: {"jsonrpc":"2.0","id":1,"result":{}}\n\r\n'))?.toString(),
    ).toBe('data: {"jsonrpc":"2.0","id":1,"result":{}}\n\r\n')
    expect(f.answered).toBe(true)
  })

  const text = `event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Zürich ☃"}]}}\r\n\r\n`
  const bytes = Buffer.from(text)
  it.each(Array.from({ length: bytes.length + 1 }, (_, i) => i))(
    'a multi-byte CRLF event cut at byte %i is relayed byte for byte, whole',
    (i) => {
      const f = pass()
      const first = f.push(bytes.subarray(0, i))
      const second = f.push(bytes.subarray(i))
      // nothing before the blank line: only whole events go out
      if (i < bytes.length - 1) expect(first).toBeUndefined()
      expect(
        Buffer.concat([first ?? Buffer.alloc(0), second ?? Buffer.alloc(0)]).equals(bytes),
      ).toBe(true)
      expect(f.answered).toBe(true)
    },
  )
})
