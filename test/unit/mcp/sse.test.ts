import { describe, expect, it } from 'vitest'
import { parseEvent, replaceData, SseReader } from '../../../src/mcp/sse.js'

/** Feeds `chunks` and returns every complete event's text, and all bytes handed on. */
function read(chunks: readonly Buffer[]): { events: string[]; bytes: Buffer; held: number } {
  const reader = new SseReader()
  const events: string[] = []
  const bytes: Buffer[] = []
  for (const chunk of chunks) {
    const batch = reader.push(chunk)
    if (batch === undefined) continue
    bytes.push(batch.bytes)
    for (const e of batch.events) events.push(e.toString('utf8'))
  }
  return { events, bytes: Buffer.concat(bytes), held: reader.heldBytes }
}

function dataOf(events: readonly string[]): (string | undefined)[] {
  return events.map((e) => parseEvent(Buffer.from(e)).data)
}

const snow = 'Zürich ☃ 𝄞'

describe('SseReader', () => {
  it('frames one event per chunk without copying', () => {
    const chunk = Buffer.from('event: message\ndata: {}\n\n')
    const batch = new SseReader().push(chunk)
    expect(batch?.bytes).toBe(chunk)
    expect(batch?.events).toHaveLength(1)
  })

  it.each([
    ['LF', '\n\n'],
    ['CRLF', '\r\n\r\n'],
    ['CR', '\r\r'],
    ['LF then CRLF', '\n\r\n'],
    ['CRLF then LF', '\r\n\n'],
    ['CR then CRLF', '\r\r\n'],
    ['LF then CR', '\n\r'],
  ])('ends an event at a blank line written %s', (_name, end) => {
    const { events, held } = read([Buffer.from(`data: one${end}data: two${end}`)])
    expect(dataOf(events)).toEqual(['one', 'two'])
    expect(held).toBe(0)
  })

  it('never takes a CRLF split across chunks for two line ends', () => {
    const { events } = read([
      Buffer.from('data: a\r'),
      Buffer.from('\ndata: b\r'),
      Buffer.from('\n\r\n'),
    ])
    expect(dataOf(events)).toEqual(['a\nb'])
  })

  it('holds an unfinished event and hands blank lines between events on as bytes', () => {
    const reader = new SseReader()
    expect(reader.push(Buffer.from('data: x'))).toBeUndefined()
    expect(reader.heldBytes).toBe(7)
    const batch = reader.push(Buffer.from('\n\n\n\ndata: y\n\n'))
    expect(batch?.bytes.toString()).toBe('data: x\n\n\n\ndata: y\n\n')
    expect(batch?.events.map((e) => e.toString())).toEqual(['data: x\n\n', 'data: y\n\n'])
  })

  const streams = {
    LF: `: keepalive\n\nevent: message\nid: 7\ndata: {"text":"${snow}"}\n\n`,
    CRLF: `: keepalive\r\n\r\nevent: message\r\nid: 7\r\ndata: {"text":"${snow}"}\r\n\r\n`,
    CR: `: keepalive\r\revent: message\rid: 7\rdata: {"text":"${snow}"}\r\r`,
    'LF CRLF': `: keepalive\n\r\nevent: message\nid: 7\ndata: {"text":"${snow}"}\n\r\n`,
  }
  for (const [name, text] of Object.entries(streams)) {
    const bytes = Buffer.from(text)
    const cuts = Array.from({ length: bytes.length + 1 }, (_, i) => i)
    it.each(cuts)(`${name}: cut at byte %i, every character and every byte survives`, (i) => {
      const out = read([bytes.subarray(0, i), bytes.subarray(i)])
      expect(out.bytes.equals(bytes)).toBe(true)
      const data = dataOf(out.events).filter((d) => d !== undefined)
      expect(data).toEqual([`{"text":"${snow}"}`])
    })
    it(`${name}: one byte at a time`, () => {
      const out = read(Array.from(bytes, (b) => Buffer.from([b])))
      expect(out.bytes.equals(bytes)).toBe(true)
      expect(dataOf(out.events).filter((d) => d !== undefined)).toEqual([`{"text":"${snow}"}`])
    })
  }

  it('take() hands over the held bytes', () => {
    const reader = new SseReader()
    reader.push(Buffer.from('data: partial'))
    expect(reader.take().toString()).toBe('data: partial')
    expect(reader.heldBytes).toBe(0)
  })
})

describe('parseEvent', () => {
  it('reads data fields as HTML §9.2.6 does and keeps the other lines', () => {
    const e = parseEvent(
      Buffer.from(
        'event: message\r\nid: 41\r\nretry: 10\r\n: note\r\ndata:a\r\ndata\r\ndata:  b\r\n\r\n',
      ),
    )
    expect(e.data).toBe('a\n\n b')
    expect(e.otherLines).toEqual(['event: message', 'id: 41', 'retry: 10', ': note'])
    expect(parseEvent(Buffer.from(': only a comment\n\n')).data).toBeUndefined()
    expect(parseEvent(Buffer.from('database: x\n\n')).data).toBeUndefined()
  })

  it('strips a byte order mark at the start of the stream only', () => {
    const raw = Buffer.from('\ufeffdata: x\n\n')
    expect(parseEvent(raw, true).data).toBe('x')
    expect(parseEvent(raw, false).data).toBeUndefined()
  })

  it('refuses invalid UTF-8 instead of replacing it', () => {
    expect(() => parseEvent(Buffer.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0xff, 0x0a, 0x0a]))).toThrow(
      TypeError,
    )
  })

  it('replaceData keeps event, id, retry and comment lines', () => {
    const e = parseEvent(
      Buffer.from('event: message\nid: 41\nretry: 10\n: note\ndata: {"old":1}\n\n'),
    )
    expect(replaceData(e, '{"new":1}').toString()).toBe(
      'event: message\nid: 41\nretry: 10\n: note\ndata: {"new":1}\n\n',
    )
  })
})
