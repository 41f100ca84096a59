import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { parseMessage } from '../../../src/mcp/jsonrpc.js'

/** The refusal's reason and detail, or the parsed message. */
function read(body: string | Buffer, maxDepth = 64) {
  try {
    return parseMessage(typeof body === 'string' ? Buffer.from(body) : body, maxDepth)
  } catch (err) {
    if (err instanceof GatewayError) return { reason: err.code, detail: err.detail }
    throw err
  }
}
const reason = (body: string | Buffer, maxDepth = 64) => {
  const r = read(body, maxDepth)
  return 'reason' in r ? r.reason : undefined
}

const call = (args: string) =>
  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get","arguments":${args}}}`

describe('parseMessage', () => {
  it('reads bodies with crossed subtrees exactly as JSON.parse does', () => {
    const args =
      '{"a":{"s":"x\\"y\\\\","t":"}]{[","u":"\\ud800"},"b":[[["\\\\\\""]]],"Name":{"name":1,"name":2}}'
    const text = call(args)
    const m = read(text)
    expect(m).toMatchObject({ kind: 'request', method: 'tools/call', rawId: '1' })
    expect(m).toHaveProperty('params', JSON.parse(text).params)
  })

  // The fast scan may pass invalid JSON; the refusal names what the strict scan finds first.
  it.each([
    ['a control character in a deep string', call('{"a":{"s":"\u0001"}}'), 'parse_error'],
    ['a bad escape in a deep string', call('{"a":{"s":"\\x"}}'), 'parse_error'],
    ['an unterminated deep string', call('{"a":{"s":"abc}}'), 'parse_error'],
    ['a missing comma in a deep array', call('{"a":[1 2]}'), 'parse_error'],
    [
      'a syntax error in a crossed subtree, then a duplicate',
      '{"params":{"arguments":{"a":{"s":1,}}},"id":1,"id":2}',
      'parse_error',
    ],
    [
      'a control character in a deep string, then a case variant',
      '{"params":{"arguments":{"a":["\t"]}},"Method":"x"}',
      'parse_error',
    ],
    [
      'a duplicate, then a syntax error in a crossed subtree',
      '{"id":1,"id":2,"params":{"arguments":{"a":{"s":1,}}}}',
      'duplicate_key',
    ],
    [
      'too deep in a crossed subtree, then a syntax error',
      '{"params":{"arguments":{"a":[[[1]]],"b":{"s":1,}}}}',
      'json_too_deep',
    ],
    [
      'a syntax error in a crossed subtree, then too deep',
      '{"params":{"arguments":{"b":{"s":1,},"a":[[[1]]]}}}',
      'parse_error',
    ],
    ['a batch', '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 'batch_not_supported'],
    ['a malformed batch', '[{"jsonrpc":"2.0","id":1,"method":"ping"},]', 'parse_error'],
    ['a batch too deep', '[{"params":{"a":{"b":{"c":[[1]]}}}}]', 'json_too_deep'],
    [
      'a fractional id after a crossed subtree',
      '{"jsonrpc":"2.0","params":{"arguments":{"a":[{}]}},"id":1.5}',
      'invalid_id',
    ],
  ])('refuses %s', (_what, text, expected) => {
    expect(reason(text, 6)).toBe(expected)
  })

  it('keeps the strict scan detail of a refusal', () => {
    expect(read('{"params":{"arguments":{"a":[[[1]]]}}}', 6)).toEqual({
      reason: 'json_too_deep',
      detail: 'nesting deeper than 6',
    })
    expect(read(call('{"a":{"s":"\\""},"k":1,"k":2}'))).toEqual({
      reason: 'duplicate_key',
      detail: 'duplicate key "k"',
    })
  })

  it.each([
    ['a lone continuation byte', [0x80]],
    ['an overlong encoding', [0xc0, 0xaf]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a truncated sequence', [0xe6, 0x9d]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ])('refuses invalid UTF-8 in a deep string: %s', (_what, bytes) => {
    const [head, tail] = call('{"a":{"s":"@"}}').split('@') as [string, string]
    const body = Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)])
    expect(reason(body)).toBe('parse_error')
  })

  it('accepts lone surrogate escapes in deep strings as JSON.parse does', () => {
    const text = call('{"a":{"\\udc00":"\\ud800","k":["\\udfff"]}}')
    expect(read(text)).toHaveProperty('params.arguments', JSON.parse(text).params.arguments)
  })
})
