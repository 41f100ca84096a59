import { describe, expect, it } from 'vitest'
import { SseFramer } from '../../../src/upstream/sse-framing.js'

const progress = 'event: message\ndata: {"method":"notifications/progress","params":{"progress":1}}\n\n'
const result = 'event: message\ndata: {"result":{"content":[]},"jsonrpc":"2.0","id":1}\n\n'

describe('SseFramer', () => {
  it('passes whole events through untouched and without copying', () => {
    const f = new SseFramer()
    const chunk = Buffer.from(progress)
    expect(f.push(chunk)).toBe(chunk)
    expect(f.sawResponse).toBe(false)
    expect(f.push(Buffer.from(': keepalive\n\n'))?.toString()).toBe(': keepalive\n\n')
  })

  it('holds back a partial event until its blank line arrives', () => {
    const f = new SseFramer()
    expect(f.push(Buffer.from(progress + result.slice(0, 20)))?.toString()).toBe(progress)
    expect(f.heldBytes).toBe(20)
    expect(f.push(Buffer.from(result.slice(20)))?.toString()).toBe(result)
    expect(f.heldBytes).toBe(0)
    expect(f.sawResponse).toBe(true)
  })

  it('understands CRLF and CR line endings', () => {
    const f = new SseFramer()
    expect(f.push(Buffer.from('data: {"jsonrpc":"2.0","id":2,"error":{"code":1}}\r\n\r\n'))?.toString()).toContain('"error"')
    expect(f.sawResponse).toBe(true)
    expect(new SseFramer().push(Buffer.from('data: x\r\r'))?.toString()).toBe('data: x\r\r')
  })

  it('does not count notifications or nested "result" keys as the response', () => {
    const f = new SseFramer()
    f.push(Buffer.from('data: {"jsonrpc":"2.0","method":"notifications/message","params":{"result":1}}\n\n'))
    expect(f.sawResponse).toBe(false)
  })
})
