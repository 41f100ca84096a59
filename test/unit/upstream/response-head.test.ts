import { describe, expect, it } from 'vitest'
import { bodyKind } from '../../../src/mcp/body-transform.js'
import { relayedHeaders } from '../../../src/upstream/response-head.js'

describe('relayedHeaders', () => {
  it('drops hop-by-hop, auth-bearing and Alt-Svc headers, keeps the rest', () => {
    const out = relayedHeaders({
      'content-type': 'application/json',
      'content-length': '10',
      connection: 'keep-alive',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'set-cookie': ['a=1'],
      'www-authenticate': 'Bearer',
      'alt-svc': 'h3=":443"',
      'x-request-id': 'r1',
    })
    expect(out).toEqual({ 'content-type': 'application/json', 'x-request-id': 'r1' })
  })

  it('drops every header the backend nominates in Connection, in any case and over repeats', () => {
    const out = relayedHeaders({
      connection: ['close, X-Internal', ' x-trace-token ,,'],
      'x-internal': '1',
      'x-trace-token': '2',
      'mcp-session-id': 's',
    })
    expect(out).toEqual({ 'mcp-session-id': 's' })
    expect(relayedHeaders({ connection: 'Mcp-Session-Id', 'mcp-session-id': 's' })).toEqual({})
  })
})

describe('bodyKind', () => {
  it.each([
    ['application/json', 'json'],
    ['Application/JSON; charset=utf-8', 'json'],
    [' application/json ;charset=UTF-8', 'json'],
    ['text/event-stream', 'sse'],
    ['TEXT/EVENT-STREAM;charset=utf-8', 'sse'],
    ['application/json-seq', 'other'],
    ['text/html', 'other'],
    ['application/problem+json', 'other'],
  ] as const)('%s is %s', (type, kind) => {
    expect(bodyKind(type)).toBe(kind)
  })

  it('no header is none; repeated headers are other', () => {
    expect(bodyKind(undefined)).toBe('none')
    expect(bodyKind(['application/json', 'text/html'])).toBe('other')
  })
})
