import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { parseMessage, type JsonRpcMessage } from '../../../src/mcp/jsonrpc.js'
import {
  bodyWithTraceContext,
  setTraceHeaders,
  spliceTraceContext,
  type TraceFields,
} from '../../../src/telemetry/propagate.js'
import { readAll, type Reading } from '../../helpers/readers.js'

const OURS = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01'
const WITH_STATE: TraceFields = { traceparent: OURS, tracestate: 'gw=1' }
const NO_STATE: TraceFields = { traceparent: OURS, tracestate: undefined }

/** The splice of `text` as the proxy stage applies it: the strict reader's message first. */
function splice(text: string, fields: TraceFields = NO_STATE): string | undefined {
  const message = parseMessage(Buffer.from(text, 'utf8'), 64)
  return spliceTraceContext(text, message.params, fields)
}

describe('spliceTraceContext: the one field the gateway writes in a judged body', () => {
  it.each([
    [
      'replaces a client traceparent where it is',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"x":1,"traceparent":"00-bad"}}}',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"x":1,"traceparent":"${OURS}"}}}`,
    ],
    [
      'inserts it first in an existing _meta',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"x":1},"name":"a"}}',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"${OURS}","x":1},"name":"a"}}`,
    ],
    [
      'inserts it into an empty _meta',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{ }}}',
      `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"traceparent":"${OURS}" }}}`,
    ],
    [
      'inserts _meta first in params',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"_meta":1}}}',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"${OURS}"},"name":"a","arguments":{"_meta":1}}}`,
    ],
    [
      'inserts _meta into empty params',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}',
      `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"traceparent":"${OURS}"}}}`,
    ],
    [
      'inserts params into a request without any',
      ' {"jsonrpc":"2.0","id":1,"method":"ping"}',
      ` {"params":{"_meta":{"traceparent":"${OURS}"}},"jsonrpc":"2.0","id":1,"method":"ping"}`,
    ],
    [
      'finds an escaped key, and leaves look-alikes elsewhere alone',
      '{"traceparent":"root","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"traceparent":"arg"},"_meta":{"trace\\u0070arent":"00-x","TRACEPARENT":"y"}}}',
      `{"traceparent":"root","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"traceparent":"arg"},"_meta":{"trace\\u0070arent":"${OURS}","TRACEPARENT":"y"}}}`,
    ],
    [
      'keeps whitespace, big ids and non-ASCII text byte for byte',
      '{\n  "jsonrpc": "2.0",\n  "id": 123456789012345678901234567890,\n  "method": "tools/call",\n  "params": {\n    "name": "météo 🌧",\n    "_meta": { "traceparent" : 7 }\n  }\n}',
      `{\n  "jsonrpc": "2.0",\n  "id": 123456789012345678901234567890,\n  "method": "tools/call",\n  "params": {\n    "name": "météo 🌧",\n    "_meta": { "traceparent" : "${OURS}" }\n  }\n}`,
    ],
  ])('%s', (_, before, after) => {
    expect(splice(before)).toBe(after)
  })

  it.each([
    [
      'replaces tracestate',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate":"a=1","traceparent":"t"}}}',
      `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate":"gw=1","traceparent":"${OURS}"}}}`,
      WITH_STATE,
    ],
    [
      'inserts tracestate with traceparent',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"k":true}}}',
      `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate":"gw=1","traceparent":"${OURS}","k":true}}}`,
      WITH_STATE,
    ],
    [
      'removes a tracestate followed by another member',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate": "a=1" , "k":1}}}',
      `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"${OURS}","k":1}}}`,
      NO_STATE,
    ],
    [
      'removes a last tracestate with the comma before it',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"k":1, "trace\\"state":0, "tracestate":"a=1"}}}',
      `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"${OURS}","k":1, "trace\\"state":0}}}`,
      NO_STATE,
    ],
    [
      'removes an only tracestate',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate":"a=1"}}}',
      `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"${OURS}"}}}`,
      NO_STATE,
    ],
  ])('%s', (_, before, after, fields) => {
    expect(splice(before, fields)).toBe(after)
  })

  it('declines (the body travels as judged) when _meta is no object or the text and parse disagree', () => {
    const nullMeta = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null}}'
    expect(splice(nullMeta)).toBeUndefined()
    const text = '{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{}}}'
    // The parse says no params, the text has them: never doubled up.
    expect(spliceTraceContext(text, undefined, NO_STATE)).toBeUndefined()
    // The parse has a traceparent the text does not: a key the splice cannot place once.
    expect(spliceTraceContext(text, { _meta: { traceparent: 'x' } }, NO_STATE)).toBeUndefined()
    expect(spliceTraceContext(text, { name: 'a' }, NO_STATE)).toBeUndefined()
    expect(spliceTraceContext('[1]', undefined, NO_STATE)).toBeUndefined()
  })

  it('touches requests only: notifications and responses are forwarded byte for byte', () => {
    const p = { traceparent: OURS }
    for (const text of [
      '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
      '{"jsonrpc":"2.0","id":4,"result":{}}',
    ]) {
      const body = Buffer.from(text)
      expect(bodyWithTraceContext(body, parseMessage(body, 64), p)).toBe(body)
    }
    const req = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}')
    expect(bodyWithTraceContext(req, parseMessage(req, 64), {})).toBe(req)
    expect(bodyWithTraceContext(req, undefined, p)).toBe(req)
    expect(bodyWithTraceContext(req, parseMessage(req, 64), p).toString()).toContain(OURS)
  })

  it('setTraceHeaders replaces every client and configured copy', () => {
    const h = ['TraceParent', 'a', 'x-k', '1', 'tracestate', 'b', 'traceparent', 'c']
    setTraceHeaders(h, { traceparent: OURS, tracestate: 'gw=1' })
    expect(h).toEqual(['x-k', '1', 'traceparent', OURS, 'tracestate', 'gw=1'])
  })
})

// ---------------------------------------------------------------------------------------------
// Every backend reading of a spliced body names what the gateway judged

/** What a reading acts on, the trace keys aside. */
function acted(r: Reading): unknown {
  return {
    refused: r.refused !== undefined,
    batch: r.batch,
    messages: r.messages.map((m) => ({
      method: m.method,
      id: m.id,
      jsonrpc: m.jsonrpc,
      hasClaim: m.hasClaim,
      claim: m.claim,
      named: m.named,
      targets: m.targets,
    })),
  }
}

/** params without `_meta`'s trace keys (and an empty `_meta` / params the splice added). */
function withoutTrace(value: unknown): unknown {
  const v = structuredClone(value) as { params?: Record<string, unknown> }
  const meta = v.params?.['_meta'] as Record<string, unknown> | undefined
  if (meta !== undefined && typeof meta === 'object' && meta !== null) {
    delete meta['traceparent']
    delete meta['tracestate']
  }
  return v
}

const KEY = fc.constantFrom(
  'name',
  'uri',
  'arguments',
  'cursor',
  'traceparent',
  'tracestate',
  'Traceparent',
  '_meta',
  '__proto__',
  'x',
  'é',
)
const SCALAR = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('00-bad', 'a=1', '\u2028', '"}', 'get_secret'),
)
const VALUE = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    SCALAR,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(KEY, tie('value'), { maxKeys: 3 }),
  ),
})).value

/** Generated requests as a client might write them: key order, spacing, ids, `_meta` shapes. */
const REQUEST = fc
  .record({
    method: fc.constantFrom('tools/call', 'prompts/get', 'resources/read', 'tools/list', 'ping'),
    id: fc.oneof(fc.integer(), fc.string(), fc.constant('9007199254740993')),
    bigId: fc.boolean(),
    name: fc.constantFrom('get_forecast', 'get_\u200fsecret', 'météo', 'file:///a'),
    arguments: fc.option(fc.dictionary(KEY, VALUE, { maxKeys: 4 }), { nil: undefined }),
    meta: fc.option(
      fc.dictionary(
        fc.constantFrom('traceparent', 'tracestate', 'progressToken', 'k', 'TraceState'),
        SCALAR,
        { maxKeys: 4 },
      ),
      { nil: undefined },
    ),
    withParams: fc.boolean(),
    claim: fc.boolean(),
    indent: fc.constantFrom(undefined, 1, '\t'),
  })
  .map((g) => {
    const params: Record<string, unknown> = {}
    if (g.method !== 'tools/list' && g.method !== 'ping')
      params[g.method === 'resources/read' ? 'uri' : 'name'] = g.name
    if (g.arguments !== undefined) params['arguments'] = g.arguments
    const meta: Record<string, unknown> = { ...g.meta }
    if (g.claim) meta['io.modelcontextprotocol/protocolVersion'] = '2026-07-28'
    if (g.meta !== undefined || g.claim) params['_meta'] = meta
    const body: Record<string, unknown> = { jsonrpc: '2.0', id: g.id, method: g.method }
    if (g.withParams || Object.keys(params).length > 0) body['params'] = params
    let text = JSON.stringify(body, null, g.indent)
    // An id past 2^53 stays text: the splice must not round it.
    if (g.bigId)
      text = text.replace(/"id": ?(-?\d+|"[^"]*")/, '"id":123456789012345678901234567890')
    return { text, method: g.method, name: g.name }
  })

describe('a spliced body reads the same as the judged one', () => {
  it('to every reader of test/helpers/readers.ts, and to the strict reader', () => {
    let spliced = 0
    fc.assert(
      fc.property(REQUEST, fc.boolean(), ({ text, method, name }, state) => {
        let message: JsonRpcMessage
        try {
          message = parseMessage(Buffer.from(text, 'utf8'), 64)
        } catch {
          return // the gateway refuses it: nothing is forwarded, nothing spliced
        }
        const out = spliceTraceContext(text, message.params, state ? WITH_STATE : NO_STATE)
        if (out === undefined) return
        spliced++
        const again = parseMessage(Buffer.from(out, 'utf8'), 64)
        expect(again.kind).toBe(message.kind)
        expect(again.method).toBe(message.method)
        expect(again.rawId).toBe(message.rawId)
        const meta = again.params?.['_meta'] as Record<string, unknown>
        expect(meta['traceparent']).toBe(OURS)
        expect(meta['tracestate']).toBe(state ? 'gw=1' : undefined)
        // Everything else (arguments, name, uri, cursor, the other `_meta` keys) is unchanged.
        const expected = withoutTrace(JSON.parse(text))
        const actual = withoutTrace(JSON.parse(out)) as { params?: Record<string, unknown> }
        const before = expected as { params?: Record<string, unknown> }
        if (before.params === undefined) delete actual.params
        else if (before.params['_meta'] === undefined) delete actual.params?.['_meta']
        expect(actual).toEqual(expected)
        const headers = [
          'content-type',
          'application/json',
          'mcp-protocol-version',
          '2026-07-28',
          'mcp-method',
          method,
          'mcp-name',
          name,
        ]
        for (const backendValidates of [false, true]) {
          const a = readAll({ rawHeaders: headers, body: Buffer.from(text) }, { backendValidates })
          const b = readAll({ rawHeaders: headers, body: Buffer.from(out) }, { backendValidates })
          expect(b.map(acted)).toEqual(a.map(acted))
        }
      }),
      { seed: 20261130, numRuns: 300 },
    )
    expect(spliced).toBeGreaterThan(150)
  })
})
