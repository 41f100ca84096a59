import { describe, expect, it } from 'vitest'
import { SseParser } from '../../../src/client/sse.js'

describe('SseParser', () => {
  it('yields the data of complete events, across chunk and multi-byte boundaries', () => {
    const p = new SseParser()
    const text =
      ': keepalive\n\nevent: message\ndata: {"a":"é"}\n\nevent: message\r\ndata: 1\r\ndata: 2\r\n\r\n'
    const bytes = Buffer.from(text)
    const out: string[] = []
    // one byte at a time splits the two-byte é and every line ending
    for (let i = 0; i < bytes.length; i++) out.push(...p.push(bytes.subarray(i, i + 1)))
    expect(out).toEqual(['{"a":"é"}', '1\n2'])
  })

  it('refuses an event that never ends past its bound', () => {
    const p = new SseParser()
    expect(() => p.push(Buffer.alloc(1024 * 1024 + 1, 0x61))).toThrow(/too large/)
  })
})
