import { describe, expect, it } from 'vitest'
import type { EndpointCall } from '../../../src/endpoint/call.js'
import { forwardHeaders, type HeaderChanges } from '../../../src/endpoint/headers.js'
import type { McpRequestInfo } from '../../../src/mcp/classify.js'
import { compileHeaderRules } from '../../../src/mcp/owned-headers.js'
import type { ParamDeclaration } from '../../../src/mcp/param-headers.js'
import { readRequestHead } from '../../../src/mcp/request-head.js'

/** The server's configured upstream headers (`servers.<name>.headers`), as runtime.ts lists them. */
const CONFIGURED = ['X-Api-Key', 'server-secret']
const RULES = compileHeaderRules(['X-Api-Key'], undefined)
const PEER = '203.0.113.7'
const TRACE = {
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  tracestate: 'gw=1',
}
const REGION: ParamDeclaration = { path: ['region'], header: 'Region' }

/** A judged call: `raw` read with the server's header rules, `args` as its `tools/call` arguments. */
function callOf(
  raw: readonly string[],
  args: unknown,
  peer: string | undefined,
): Pick<EndpointCall, 'head' | 'peer' | 'mcp'> {
  const mcp: McpRequestInfo = {
    era: 'modern',
    version: '2026-07-28',
    method: 'tools/call',
    kind: 'request',
    targets: [],
    verified: true,
    message: {
      kind: 'request',
      method: 'tools/call',
      params: { name: 'get_alerts', arguments: args },
      rawId: '1',
    },
  }
  return { head: readRequestHead(['Host', 'gw.example', ...raw], RULES), peer, mcp }
}

interface Row {
  readonly rule: string
  readonly raw: readonly string[]
  readonly args?: unknown
  readonly configured?: readonly string[]
  readonly auth?: string
  readonly propagation?: Readonly<Record<string, string>>
  readonly changes?: HeaderChanges
  /** The upstream list after the gateway's own `X-Forwarded-*` (which rows about them test). */
  readonly sent: readonly string[]
}

const FORWARDED = [
  'x-forwarded-for',
  PEER,
  'x-forwarded-proto',
  'http',
  'x-forwarded-host',
  'gw.example',
]

// prettier-ignore
const ROWS: readonly Row[] = [
  { rule: 'judged client headers go in the client order and case',
    raw: ['Accept', 'application/json', 'x-trace-me', '1'],
    sent: ['Accept', 'application/json', 'x-trace-me', '1'] },
  { rule: 'hop-by-hop headers, Host, Cookie and the client Authorization never go',
    raw: ['Connection', 'keep-alive', 'Cookie', 'a=b', 'Authorization', 'Bearer caller', 'te', 'x'],
    sent: [] },
  { rule: 'a configured header replaces every client copy, in any case',
    raw: ['x-api-key', 'attacker', 'X-API-KEY', 'other', 'X_Api_Key', 'twin'],
    configured: CONFIGURED,
    sent: ['X-Api-Key', 'server-secret'] },
  { rule: 'the exchanged token is the Authorization, never the caller one',
    raw: ['authorization', 'Bearer caller'], auth: 'Bearer exchanged',
    sent: ['authorization', 'Bearer exchanged'] },
  { rule: 'client X-Forwarded-*, Forwarded and X-Real-IP give way to the gateway own',
    raw: ['X-Forwarded-For', '6.6.6.6', 'x-forwarded-host', 'evil', 'Forwarded', 'for=1', 'X-Real-IP', '6.6.6.6'],
    sent: [] },
  { rule: 'trace context: the gateway span replaces the client one',
    raw: ['traceparent', '00-11111111111111111111111111111111-2222222222222222-01', 'tracestate', 'x=1'],
    propagation: TRACE,
    sent: ['traceparent', TRACE.traceparent, 'tracestate', TRACE.tracestate] },
  { rule: 'baggage is only the gateway propagation, never the client text',
    raw: ['baggage', 'user.id=admin'], propagation: { ...TRACE, baggage: 'k=v' },
    sent: ['traceparent', TRACE.traceparent, 'tracestate', TRACE.tracestate, 'baggage', 'k=v'] },
  { rule: 'SEP-2243 headers stay as judged without changes',
    raw: ['mcp-method', 'tools/call', 'mcp-name', 'get_alerts', 'Mcp-Param-Region', 'eu'],
    sent: ['mcp-method', 'tools/call', 'mcp-name', 'get_alerts', 'Mcp-Param-Region', 'eu'] },
  { rule: 'Mcp-Method replaced for a member request of another method',
    raw: ['mcp-method', 'tools/call'], changes: { method: 'tools/list', name: null },
    sent: ['mcp-method', 'tools/list'] },
  { rule: 'Mcp-Name replaced by the own name, in the SEP-2243 encoding',
    raw: ['Mcp-Name', 'weather_get_alerts'], changes: { name: 'Zürich' },
    sent: ['mcp-name', '=?base64?WsO8cmljaA==?='] },
  { rule: 'Mcp-Session-Id replaced by the backend id, or removed',
    raw: ['mcp-session-id', 'sealed'], changes: { sessionId: 'backend-id' },
    sent: ['mcp-session-id', 'backend-id'] },
  { rule: 'Mcp-Session-Id removed (null)',
    raw: ['mcp-session-id', 'sealed', 'mcp-name', 'a'], changes: { sessionId: null },
    sent: ['mcp-name', 'a'] },
  { rule: 'a 2026-07-28 client Mcp-Param-* goes untouched when changes name none',
    raw: ['Mcp-Param-Region', 'us'], args: { region: 'eu' }, changes: { name: 'get_alerts' },
    sent: ['Mcp-Param-Region', 'us', 'mcp-name', 'get_alerts'] },
  { rule: 'Mcp-Param-* derived from the arguments in place of the client copies',
    raw: ['Mcp-Param-Region', 'us', 'mcp-param-region', 'x', 'Mcp-Param-Other', 'y'],
    args: { region: 'eu' }, changes: { params: [REGION] },
    sent: ['Mcp-Param-Region', 'eu'] },
  { rule: 'a tool that declares none: the client copies go all the same',
    raw: ['Mcp-Param-Region', 'us'], args: { region: 'eu' }, changes: { params: [] },
    sent: [] },
  { rule: 'the declared case, the SEP-2243 encoding of the value',
    raw: [], args: { region: 'Zürich ' }, changes: { params: [{ path: ['region'], header: 'rEgIoN' }] },
    sent: ['Mcp-Param-rEgIoN', '=?base64?WsO8cmljaCA=?='] },
  { rule: 'integers, booleans and nested arguments',
    raw: [], args: { n: -42, on: true, site: { code: 'a' } },
    changes: { params: [
      { path: ['n'], header: 'N' }, { path: ['on'], header: 'On' },
      { path: ['site', 'code'], header: 'Site-Code' },
    ] },
    sent: ['Mcp-Param-N', '-42', 'Mcp-Param-On', 'true', 'Mcp-Param-Site-Code', 'a'] },
  { rule: 'no header for an argument absent, null, not an integer, or not a primitive',
    raw: ['Mcp-Param-A', 'spoof'],
    args: { b: null, c: 2.5, d: 2 ** 53, e: { x: 1 }, f: ['x'], g: Number.NaN },
    changes: { params: ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((k) => ({ path: [k], header: k })) },
    sent: [] },
  { rule: 'no header for an inherited property or a path through a non-object',
    raw: [], args: { s: 'text' },
    changes: { params: [{ path: ['toString'], header: 'T' }, { path: ['s', 'length'], header: 'L' }] },
    sent: [] },
  { rule: 'no header without parsed arguments (a body forwarded unread)',
    raw: [], args: undefined, changes: { params: [REGION] },
    sent: [] },
]

describe('forwardHeaders: the one place upstream request headers are built', () => {
  it.each(ROWS)('$rule', (row) => {
    const call = callOf(row.raw, row.args, PEER)
    const out = forwardHeaders(row.configured ?? [], call, row.auth, row.propagation, row.changes)
    // The gateway's X-Forwarded-* sit after the configured and credential headers and before
    // the trace context: take them out to compare what the row is about.
    const at = out.indexOf('x-forwarded-for')
    expect(out.slice(at, at + FORWARDED.length)).toEqual(FORWARDED)
    expect([...out.slice(0, at), ...out.slice(at + FORWARDED.length)]).toEqual(row.sent)
  })

  it('a request of the gateway own (no peer) carries no X-Forwarded-*', () => {
    const out = forwardHeaders(
      [],
      callOf(['X-Forwarded-For', '6.6.6.6'], undefined, undefined),
      undefined,
      undefined,
      undefined,
    )
    expect(out).toEqual([])
  })

  it('configured headers, then Authorization, then X-Forwarded-*, then trace context', () => {
    const out = forwardHeaders(
      CONFIGURED,
      callOf(['accept', '*/*'], undefined, PEER),
      'Bearer t',
      TRACE,
      undefined,
    )
    expect(out).toEqual([
      'accept',
      '*/*',
      ...CONFIGURED,
      'authorization',
      'Bearer t',
      ...FORWARDED,
      'traceparent',
      TRACE.traceparent,
      'tracestate',
      TRACE.tracestate,
    ])
  })

  it('never changes the judged header list it reads', () => {
    const call = callOf(['Mcp-Param-Region', 'us'], { region: 'eu' }, PEER)
    const before = [...call.head.forward]
    forwardHeaders(CONFIGURED, call, 'Bearer t', TRACE, { name: 'x', params: [REGION] })
    expect(call.head.forward).toEqual(before)
  })
})
