import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import type { ExpectedId } from '../../../src/mcp/answer-scan.js'
import {
  resultTransform,
  type HookMode,
  type ResultHook,
} from '../../../src/mcp/result-transform.js'

/** The transform for a 200, `expected` undefined meaning no id check (a request of no id). */
function rt(
  type: string,
  max: number,
  hooks: readonly ResultHook[],
  mode: HookMode = 'rewrite',
  expected?: ExpectedId,
): ReturnType<typeof resultTransform> {
  return resultTransform(type, max, hooks, mode, expected, 200)
}

const BIG =
  '{"result":{"tools":[{"name":"a"},{"name":"b"}]},"jsonrpc":"2.0","id":12345678901234567890}'
const dropB: ResultHook = (m) => ({ ...m, result: { tools: [{ name: 'a' }] } })

function run(t: ReturnType<typeof resultTransform>, chunks: readonly (string | Buffer)[]): string {
  return runBytes(t, chunks).toString('utf8')
}

function runBytes(
  t: ReturnType<typeof resultTransform>,
  chunks: readonly (string | Buffer)[],
): Buffer {
  if (t === undefined) throw new Error('no transform')
  const out: Buffer[] = []
  for (const c of chunks) {
    const o = t.push(typeof c === 'string' ? Buffer.from(c) : c)
    if (o !== undefined) out.push(o)
  }
  const last = t.end()
  if (last !== undefined) out.push(last)
  return Buffer.concat(out)
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    return err instanceof GatewayError ? err.code : `not a GatewayError: ${String(err)}`
  }
  return undefined
}

/** Every way to cut `bytes` in two. */
function splits(bytes: Buffer): [number, Buffer, Buffer][] {
  const out: [number, Buffer, Buffer][] = []
  for (let i = 0; i <= bytes.length; i++) out.push([i, bytes.subarray(0, i), bytes.subarray(i)])
  return out
}

describe('resultTransform', () => {
  it('rewrites a JSON answer and keeps a big integer id byte for byte', () => {
    const out = run(rt('application/json', 1 << 20, [dropB]), [BIG.slice(0, 30), BIG.slice(30)])
    expect(out).toBe(
      '{"id":12345678901234567890,"result":{"tools":[{"name":"a"}]},"jsonrpc":"2.0"}',
    )
  })

  it('rewrites only the response event of an SSE stream, keeping the id', () => {
    const progress = 'event: message\ndata: {"method":"notifications/progress","params":{}}\n\n'
    const t = rt('text/event-stream', 1 << 20, [dropB])
    const out = run(t, [progress, `event: message\ndata: ${BIG}\n\n`])
    expect(out).toBe(
      `${progress}event: message\ndata: {"id":12345678901234567890,"result":{"tools":[{"name":"a"}]},"jsonrpc":"2.0"}\n\n`,
    )
  })

  it('refuses an answer too large to rewrite (never passes it unfiltered)', () => {
    const t = rt('application/json', 10, [dropB])
    expect(codeOf(() => run(t, [BIG]))).toBe('upstream_bad_response')
  })

  it('rewrite mode refuses a JSON body that is not a response (it could not be filtered)', () => {
    const t = rt('application/json', 1 << 20, [dropB])
    expect(codeOf(() => run(t, ['{"jsonrpc":"2.0","method":"tools/list","result":{}}']))).toBe(
      'upstream_unreadable',
    )
    const u = rt('application/json', 1 << 20, [dropB])
    expect(codeOf(() => run(u, ['<html>']))).toBe('upstream_unreadable')
  })

  it('observe mode holds a JSON answer (so it can still be refused) and relays it unchanged', () => {
    const seen: unknown[] = []
    const t = rt('application/json', 1 << 20, [(m) => void seen.push(m.result)], 'observe')
    expect(t?.streaming).toBe(false)
    expect(t?.push(Buffer.from(BIG))).toBeUndefined()
    expect(t?.end()?.toString()).toBe(BIG)
    expect(seen).toEqual([{ tools: [{ name: 'a' }, { name: 'b' }] }])
  })

  it('observe mode relays what is too large to look at, without observing it', () => {
    const seen: unknown[] = []
    const hook: ResultHook = (m) => void seen.push(m)
    expect(
      run(rt('application/json', 10, [hook], 'observe'), [BIG.slice(0, 5), BIG.slice(5)]),
    ).toBe(BIG)
    const sse = `event: message\ndata: ${BIG}\n\n`
    expect(
      run(rt('text/event-stream', 10, [hook], 'observe'), [sse.slice(0, 40), sse.slice(40)]),
    ).toBe(sse)
    expect(seen).toEqual([])
  })

  describe('the answer must carry the request id', () => {
    const answer = (id: string): string => `{"jsonrpc":"2.0","id":${id},"result":{"tools":[]}}`

    it.each([
      ['7', '7'],
      ['"a"', '"\\u0061"'],
      ['12345678901234567890', '12345678901234567890'],
    ])('request id %s matches response id %s', (req, res) => {
      for (const mode of ['rewrite', 'observe'] as const) {
        const t = rt('application/json', 1 << 20, [dropB], mode, req)
        expect(codeOf(() => run(t, [answer(res)]))).toBeUndefined()
      }
    })

    it.each([
      ['7', '8'],
      ['7', '"7"'],
      ['"a"', '"b"'],
      // 2^53 + 1 and 2^53 are one double: compared by digits they differ
      ['9007199254740993', '9007199254740992'],
      ['1', 'null'],
      // not an MCP id (a string or an integer in digits), even when numerically equal
      ['10', '1e1'],
      ['10', '10.0'],
    ])('request id %s refuses response id %s (JSON, both modes)', (req, res) => {
      for (const mode of ['rewrite', 'observe'] as const) {
        const seen: unknown[] = []
        const t = rt('application/json', 1 << 20, [(m) => void seen.push(m)], mode, req)
        expect(codeOf(() => run(t, [answer(res)]))).toBe('upstream_id_mismatch')
        expect(seen).toEqual([]) // never cached or filtered as this request's answer
      }
    })

    it('refuses a response without an id, or with the id twice', () => {
      const t = rt('application/json', 1 << 20, [dropB], 'rewrite', '1')
      expect(codeOf(() => run(t, ['{"jsonrpc":"2.0","result":{"tools":[]}}']))).toBe(
        'upstream_id_mismatch',
      )
      const u = rt('application/json', 1 << 20, [dropB], 'rewrite', '1')
      expect(codeOf(() => run(u, ['{"jsonrpc":"2.0","id":2,"id":1,"result":{"tools":[]}}']))).toBe(
        'upstream_id_mismatch',
      )
    })

    it.each(['rewrite', 'observe'] as const)(
      'SSE (%s): a response event for another id becomes an error event for this one',
      (mode) => {
        const seen: unknown[] = []
        const t = rt('text/event-stream', 1 << 20, [(m) => void seen.push(m)], mode, '"req-1"')
        const progress =
          'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n'
        const out = run(t, [progress, `event: message\ndata: ${answer('"other"')}\n\n`, progress])
        const events = out.split('\n\n').filter((e) => e.length > 0)
        expect(events).toHaveLength(2) // the progress, then the error; nothing after it
        expect(events[0]).toBe(progress.slice(0, -2))
        const error = JSON.parse((events[1] as string).replace(/^event: message\ndata: /, '')) as {
          id: unknown
          error: { code: number; data: unknown }
        }
        expect(error.id).toBe('req-1')
        expect(error.error.code).toBe(-31502)
        expect(error.error.data).toEqual({ source: 'gateway', reason: 'upstream_id_mismatch' })
        expect(seen).toEqual([])
      },
    )
  })

  describe('SSE events split at every byte offset', () => {
    const description = 'Zürich ☃ 𝄞 — ünïcödé'
    const message = `{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","description":"${description}"},{"name":"b","description":"${description}"}]}}`
    const keep = 'event: message\nid: ev-41\nretry: 1500\n: a comment\n'
    const lf = Buffer.from(`: ping\n\n${keep}data: ${message}\n\n`)
    const crlf = Buffer.from(
      `: ping\r\n\r\n${keep.replaceAll('\n', '\r\n')}data: ${message}\r\n\r\n`,
    )
    const cr = Buffer.from(`: ping\r\r${keep.replaceAll('\n', '\r')}data: ${message}\r\r`)
    const lfcrlf = Buffer.from(`: ping\n\r\n${keep}data: ${message}\n\r\n`)
    const dropBDescription = `{"id":3,"jsonrpc":"2.0","result":{"tools":[{"name":"a","description":"${description}"}]}}`

    for (const [name, stream] of [
      ['LF', lf],
      ['CRLF', crlf],
      ['CR', cr],
      ['LF CRLF', lfcrlf],
    ] as const) {
      it.each(splits(stream))(
        `observe, ${name}: cut at %i the bytes pass untouched and the hook sees the text`,
        (_i, a, b) => {
          const seen: unknown[] = []
          const t = rt(
            'text/event-stream',
            1 << 20,
            [(m) => void seen.push(m.result)],
            'observe',
            '3',
          )
          expect(runBytes(t, [a, b]).equals(stream)).toBe(true)
          expect(seen).toEqual([
            {
              tools: [
                { name: 'a', description },
                { name: 'b', description },
              ],
            },
          ])
        },
      )

      it.each(splits(stream))(
        `rewrite, ${name}: cut at %i the text is exact and id/retry/comment lines stay`,
        (_i, a, b) => {
          const hook: ResultHook = (m) => {
            const result = m.result as { tools: { name: string }[] }
            return { ...m, result: { tools: result.tools.filter((t) => t.name === 'a') } }
          }
          const t = rt('text/event-stream', 1 << 20, [hook], 'rewrite', '3')
          const out = runBytes(t, [a, b]).toString('utf8')
          expect(out).not.toContain('\ufffd')
          // Cut inside a CRLF, the LF of an event's last line end may follow the rewritten event as
          // a blank line of its own: the same stream to any SSE reader.
          const ping = {
            LF: ': ping\n\n',
            CRLF: ': ping\r\n\r\n',
            CR: ': ping\r\r',
            'LF CRLF': ': ping\n\r\n',
          }[name]
          const expected = `${ping}event: message\nid: ev-41\nretry: 1500\n: a comment\ndata: ${dropBDescription}\n\n`
          expect([expected, `${expected}\n`]).toContain(out)
          if (out !== expected) expect(a.length).toBe(stream.length - 1)
        },
      )
    }
  })

  it('refuses an SSE response event that is not valid UTF-8 in every mode (a client would read replacement characters no check saw)', () => {
    const bad = Buffer.concat([
      Buffer.from('data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"'),
      Buffer.from([0xff]),
      Buffer.from('"}]}}\n\n'),
    ])
    for (const mode of ['rewrite', 'observe', 'pass'] as const) {
      const out = run(rt('text/event-stream', 1 << 20, [dropB], mode, '1'), [bad])
      expect(out).toContain('"reason":"upstream_unreadable"')
      expect(out).toContain('"id":1,')
    }
  })
})
