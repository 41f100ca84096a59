import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors.js'
import { classify, type ClassifyPolicy } from '../../../src/mcp/classify.js'
import { readRequestHead } from '../../../src/mcp/request-head.js'

const MODERN = '2026-07-28'
const envelope = (version = MODERN) => ({
  'io.modelcontextprotocol/protocolVersion': version,
  'io.modelcontextprotocol/clientCapabilities': {},
})
const verify: ClassifyPolicy = {
  parseAlways: true,
  parseMethods: new Set(),
  allowLegacy: true,
  maxDepth: 64,
  judgesArguments: false,
}
const trust: ClassifyPolicy = { ...verify, parseAlways: false }

function head(h: Record<string, string>) {
  return readRequestHead(Object.entries(h).flat())
}
function body(v: unknown): Buffer {
  return Buffer.from(typeof v === 'string' ? v : JSON.stringify(v))
}
function call(name: string, extra: Record<string, unknown> = {}) {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name, arguments: {}, _meta: envelope(), ...extra },
  }
}
function reason(fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError)
      return `${err.code}${err.data === undefined ? '' : ` ${JSON.stringify(err.data)}`}`
    throw err
  }
}
const modern = (method: string, name?: string) => ({
  'mcp-protocol-version': MODERN,
  'mcp-method': method,
  ...(name === undefined ? {} : { 'mcp-name': name }),
})

describe('classify: 2026-07-28 requests', () => {
  it('verifies headers against the body and names the target', () => {
    const info = classify(head(modern('tools/call', 'echo')), body(call('echo')), verify)
    expect(info).toMatchObject({
      era: 'modern',
      method: 'tools/call',
      verified: true,
      targets: [{ kind: 'tool', name: 'echo' }],
    })
  })

  it('trusts headers without reading the body when the backend checks them itself', () => {
    const info = classify(head(modern('tools/call', 'echo')), body('not json at all'), trust)
    expect(info).toMatchObject({
      verified: false,
      targets: [{ kind: 'tool', name: 'echo' }],
      message: undefined,
    })
  })

  it('never forwards a batch or another encoding unread, even to a trusted backend', () => {
    const h = modern('tools/call', 'echo')
    expect(reason(() => classify(head(h), body(' [{"jsonrpc":"2.0"}]'), trust))).toBe(
      'batch_not_supported',
    )
    expect(reason(() => classify(head(h), Buffer.from('\ufeff{}'), trust))).toBe('parse_error')
    expect(reason(() => classify(head(h), Buffer.from('{}', 'utf16le'), trust))).toBe('parse_error')
    const utf16 = { ...h, 'content-type': 'application/json; charset=utf-16le' }
    expect(reason(() => classify(head(utf16), body('{}'), trust))).toBe('parse_error')
  })

  it('reads the body of a trusted backend when a feature needs it', () => {
    const p = { ...trust, parseMethods: new Set(['tools/list']) }
    expect(reason(() => classify(head(modern('tools/list')), body('nope'), p))).toBe('parse_error')
  })

  it.each([
    [
      'a spoofed Mcp-Method (tools/list over a tools/call body)',
      modern('tools/list'),
      call('delete_all'),
    ],
    ['a spoofed Mcp-Name', modern('tools/call', 'read_file'), call('delete_all')],
    ['a case variant of Mcp-Method', modern('Tools/Call', 'echo'), call('echo')],
    ['a missing Mcp-Name', modern('tools/call'), call('echo')],
    [
      'Mcp-Name with no params.name in the body',
      modern('tools/call', 'echo'),
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { _meta: envelope() } },
    ],
    [
      'a sentinel that decodes to another name',
      modern('tools/call', `=?base64?${Buffer.from('read').toString('base64')}?=`),
      call('delete_all'),
    ],
    ['an invalid sentinel', modern('tools/call', '=?base64?@@@?='), call('echo')],
    [
      'an envelope naming a legacy version',
      modern('tools/call', 'echo'),
      call('echo', { _meta: envelope('2025-11-25') }),
    ],
    ['a request without Mcp-Method', { 'mcp-protocol-version': MODERN }, call('echo')],
    [
      'resources/read with another uri',
      modern('resources/read', 'config://other'),
      { jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'config://app' } },
    ],
  ])('rejects %s with header_mismatch', (_label, h, b) => {
    expect(reason(() => classify(head(h), body(b), verify))).toBe('header_mismatch')
  })

  it('a missing Mcp-Name is a mismatch even for a trusted backend (required header, SEP-2243)', () => {
    expect(reason(() => classify(head(modern('prompts/get')), body('{}'), trust))).toBe(
      'header_mismatch',
    )
  })

  it('decodes a base64 sentinel before comparing', () => {
    const h = modern('tools/call', `=?base64?${Buffer.from('Zürich').toString('base64')}?=`)
    const info = classify(head(h), body(call('Zürich')), verify)
    expect(info.targets).toEqual([{ kind: 'tool', name: 'Zürich' }])
  })

  it('lets a modern notification through without Mcp-Method', () => {
    const b = {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 'listen:0' },
    }
    expect(classify(head({ 'mcp-protocol-version': MODERN }), body(b), trust).kind).toBe(
      'notification',
    )
  })

  it.each([
    ['a batch', '[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', 'batch_not_supported'],
    ['a response object', '{"jsonrpc":"2.0","id":1,"result":{}}', 'invalid_request'],
    ['a null id', '{"jsonrpc":"2.0","id":null,"method":"tools/list"}', 'invalid_id'],
    ['a fractional id', '{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', 'invalid_id'],
    ['an exponent id', '{"jsonrpc":"2.0","id":1E2,"method":"tools/list"}', 'invalid_id'],
    [
      'an id beyond double range',
      '{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}',
      'invalid_id',
    ],
    ['a negative zero id', '{"jsonrpc":"2.0","id":-0,"method":"tools/list"}', 'invalid_id'],
    ['a boolean id', '{"jsonrpc":"2.0","id":true,"method":"tools/list"}', 'invalid_id'],
    ['an object id', '{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', 'invalid_id'],
    ['an array id', '{"jsonrpc":"2.0","id":[1],"method":"tools/list"}', 'invalid_id'],
    [
      'a case-variant key',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","Params":{}}',
      'case_variant_key',
    ],
    [
      'a prototype key',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"__proto__":{}}}',
      'prototype_key',
    ],
    [
      'a UTF-8 byte order mark',
      Buffer.from('\ufeff{"jsonrpc":"2.0","id":1,"method":"tools/list"}'),
      'parse_error',
    ],
    [
      'UTF-16LE with a byte order mark',
      Buffer.from('\ufeff{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 'utf16le'),
      'parse_error',
    ],
    [
      'UTF-16LE without a byte order mark',
      Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 'utf16le'),
      'parse_error',
    ],
    [
      'UTF-16BE without a byte order mark',
      Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 'utf16le').swap16(),
      'parse_error',
    ],
    [
      'params as an array',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}',
      'invalid_request',
    ],
    ['jsonrpc 1.0', '{"jsonrpc":"1.0","id":1,"method":"tools/list"}', 'invalid_request'],
    [
      'duplicate method keys',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}',
      'duplicate_key',
    ],
    ['truncated JSON', '{"jsonrpc":', 'parse_error'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), 'parse_error'],
  ])('rejects %s', (_label, b, code) => {
    expect(
      reason(() =>
        classify(head(modern('tools/list')), typeof b === 'string' ? body(b) : b, verify),
      ),
    ).toBe(code)
  })

  it.each([
    ['12345678901234567890123', '12345678901234567890123'],
    ['-7', '-7'],
    ['0', '0'],
    ['"a\\u00e9"', '"a\\u00e9"'],
  ])('keeps the id %s byte for byte', (id, raw) => {
    const text = `{"jsonrpc":"2.0","id":${id},"method":"tools/list"}`
    expect(classify(head(modern('tools/list')), body(text), verify).message?.rawId).toBe(raw)
  })

  it.each([
    ['NUL', 'echo\\u0000'],
    ['a C0 control', 'echo\\u001b[31m'],
    ['DEL', 'echo\\u007f'],
    ['a C1 control', 'echo\\u0085'],
    ['a lone high surrogate', 'echo\\ud800'],
    ['a lone low surrogate', '\\udc00echo'],
    ['right-to-left override', 'echo\\u202egnp.exe'],
    ['a directional isolate', '\\u2066echo\\u2069'],
    ['a left-to-right mark', 'echo\\u200e'],
    ['an Arabic letter mark', 'echo\\u061c'],
  ])('refuses a tool name with %s', (_label, escaped) => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${escaped}","arguments":{}}}`
    expect(reason(() => classify(head({}), body(text), trust))).toBe('invalid_name')
  })

  it('refuses such names in prompts, completion refs and decoded Mcp-Name headers too', () => {
    const prompt = '{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p\\u202e"}}'
    expect(reason(() => classify(head({}), body(prompt), trust))).toBe('invalid_name')
    const ref =
      '{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p\\u0000"}}}'
    expect(reason(() => classify(head({}), body(ref), trust))).toBe('invalid_name')
    const sentinel = `=?base64?${Buffer.from('echo\u202e').toString('base64')}?=`
    expect(
      reason(() => classify(head(modern('tools/call', sentinel)), body('unread'), trust)),
    ).toBe('invalid_name')
  })

  it('accepts names with paired surrogates and other visible Unicode', () => {
    for (const name of ['😀', 'Zürich', 'search\u200b', 'ｓearch']) {
      expect(
        classify(
          head({}),
          body({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name } }),
          trust,
        ).targets,
      ).toEqual([{ kind: 'tool', name }])
    }
  })

  it('keeps a byte order mark inside a decoded Mcp-Name as a character', () => {
    const sentinel = `=?base64?${Buffer.from('\ufeffecho').toString('base64')}?=`
    expect(
      reason(() => classify(head(modern('tools/call', sentinel)), body(call('echo')), verify)),
    ).toBe('header_mismatch')
  })

  it.each(['application/json; charset=utf-16', 'application/json;charset="ISO-8859-1"'])(
    'refuses a body declared as %s',
    (contentType) => {
      const h = { ...modern('tools/list'), 'content-type': contentType }
      expect(
        reason(() =>
          classify(head(h), body({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), verify),
        ),
      ).toBe('parse_error')
    },
  )

  it('accepts charset=utf-8 in any case', () => {
    const h = { ...modern('tools/list'), 'content-type': 'application/json; Charset=UTF-8' }
    expect(
      classify(head(h), body({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), verify).method,
    ).toBe('tools/list')
  })

  it('targets completion refs and listen subscriptions', () => {
    const complete = {
      jsonrpc: '2.0',
      id: 1,
      method: 'completion/complete',
      params: { ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'a', value: '' } },
    }
    expect(classify(head(modern('completion/complete')), body(complete), verify).targets).toEqual([
      { kind: 'prompt', name: 'greet' },
    ])
    const listen = {
      jsonrpc: '2.0',
      id: 'listen:0',
      method: 'subscriptions/listen',
      params: { notifications: { resourceSubscriptions: ['a://1', 'b://2'] } },
    }
    expect(classify(head(modern('subscriptions/listen')), body(listen), verify).targets).toEqual([
      { kind: 'resource', uri: 'a://1' },
      { kind: 'resource', uri: 'b://2' },
    ])
  })

  it('refuses an unknown protocol version with the supported list', () => {
    expect(
      reason(() =>
        classify(head({ 'mcp-protocol-version': '2099-01-01' }), body('{}'), {
          ...verify,
          allowLegacy: false,
        }),
      ),
    ).toBe('unsupported_version {"supported":["2026-07-28"],"requested":"2099-01-01"}')
  })
})

describe('classify: 2025-era requests', () => {
  const legacyCall = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'delete_all' } }

  it('judges a header-less legacy client on its body', () => {
    const info = classify(head({}), body(legacyCall), trust)
    expect(info).toMatchObject({
      era: 'legacy',
      verified: true,
      targets: [{ kind: 'tool', name: 'delete_all' }],
    })
  })

  it('never trusts legacy-version headers: the body decides and must agree', () => {
    const h = { 'mcp-protocol-version': '2025-06-18', 'mcp-method': 'tools/list' }
    expect(reason(() => classify(head(h), body(legacyCall), trust))).toBe('header_mismatch')
  })

  it('rejects a modern envelope without the modern header', () => {
    expect(reason(() => classify(head({}), body(call('echo')), trust))).toBe('header_mismatch')
  })

  it('lets legacy clients post JSON-RPC responses (2025 server→client requests)', () => {
    const info = classify(
      head({ 'mcp-protocol-version': '2025-11-25' }),
      body('{"jsonrpc":"2.0","id":0,"result":{}}'),
      trust,
    )
    expect(info.kind).toBe('response')
  })

  it('refuses legacy clients where the server is modern-only', () => {
    expect(
      reason(() => classify(head({}), body(legacyCall), { ...trust, allowLegacy: false })),
    ).toBe('legacy_not_allowed {"supported":["2026-07-28"]}')
  })

  it('names the URI of a resources/subscribe, and asks for one', () => {
    const sub = {
      jsonrpc: '2.0',
      id: 4,
      method: 'resources/subscribe',
      params: { uri: 'docs://x' },
    }
    expect(classify(head({}), body(sub), trust).targets).toEqual([
      { kind: 'resource', uri: 'docs://x' },
    ])
    expect(reason(() => classify(head({}), body({ ...sub, params: { uri: 3 } }), trust))).toBe(
      'invalid_params',
    )
  })

  it('asks for params.name on a legacy tools/call', () => {
    const b = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: {} }
    expect(reason(() => classify(head({}), body(b), trust))).toBe('invalid_params')
  })
})
