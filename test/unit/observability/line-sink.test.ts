import { pino } from 'pino'
import { Writable } from 'node:stream'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createLineSink, quote, quoteId } from '../../../src/observability/line-sink.js'

describe('quoting log values', () => {
  it.each([
    ['a gateway request id', '3b241101-e2bb-4255-8caf-4136c566a962'],
    ['an id with a quote', 'a "quoted" id'],
    ['an id with a control character', 'id\u0000\n'],
    ['an upper-case UUID', '3B241101-E2BB-4255-8CAF-4136C566A962'],
    ['an id of 36 characters that is no UUID', 'x'.repeat(35) + '"'],
  ])('%s is the JSON string of the id', (_what, id) => {
    expect(JSON.parse(quoteId(id))).toBe(id)
    expect(quoteId(id)).toBe(JSON.stringify(id))
  })

  it('quotes names as JSON strings, repeated ones from the memo', () => {
    expect(quote('tools/call')).toBe('"tools/call"')
    expect(quote('tools/call')).toBe('"tools/call"')
    expect(quote('get_"x"')).toBe(JSON.stringify('get_"x"'))
    expect(quote('y'.repeat(300))).toBe(JSON.stringify('y'.repeat(300)))
  })
})

describe('the line head', () => {
  afterEach(() => void vi.useRealTimers())

  it.each([0, 7, 70, 999, 1000, 1_733_100_000_123, 1_733_100_059_999, 1_733_100_060_000])(
    'writes the time as pino does at %i ms',
    (now) => {
      vi.useFakeTimers({ now: now - 1 })
      const sink = createLineSink(pino(new Writable({ write: (_c, _e, cb) => cb() })), {
        batch: false,
      })
      sink?.head() // the millisecond before, so the next head is built anew
      vi.setSystemTime(now)
      const head = JSON.parse(`${sink?.head() ?? ''}}`) as Record<string, unknown>
      expect(head).toEqual({ level: 30, time: new Date(now).toISOString(), svc: 'mcp-edge' })
    },
  )
})
