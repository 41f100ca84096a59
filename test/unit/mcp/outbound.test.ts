import { describe, expect, it } from 'vitest'
import { modernEnvelope, outboundHeaders } from '../../../src/mcp/outbound.js'

/** The one builder of the gateway's own requests (mcp/outbound.ts), rule by rule. */

const pairs = (h: readonly string[]): [string, string][] =>
  Array.from({ length: h.length / 2 }, (_, i) => [h[2 * i] as string, h[2 * i + 1] as string])

const CONFIGURED = ['x-api-key', 'k', 'authorization', 'Bearer configured']

describe('outboundHeaders', () => {
  it.each([
    [
      'a 2026-07-28 POST: JSON in, JSON or SSE out, the version and Mcp-Method',
      { http: 'POST', method: 'server/discover' },
      [
        ['x-api-key', 'k'],
        ['authorization', 'Bearer configured'],
        ['content-type', 'application/json'],
        ['accept', 'application/json, text/event-stream'],
        ['mcp-protocol-version', '2026-07-28'],
        ['mcp-method', 'server/discover'],
      ],
    ],
    [
      "a message in a 2025-era session: the session's version and id, no Mcp-Method",
      { http: 'POST', method: 'tools/call', session: { version: '2025-06-18', sessionId: 's1' } },
      [
        ['x-api-key', 'k'],
        ['authorization', 'Bearer configured'],
        ['content-type', 'application/json'],
        ['accept', 'application/json, text/event-stream'],
        ['mcp-protocol-version', '2025-06-18'],
        ['mcp-session-id', 's1'],
      ],
    ],
    [
      "the session's GET stream: only SSE accepted, no body headers",
      { http: 'GET', session: { version: '2025-11-25', sessionId: 's1' } },
      [
        ['x-api-key', 'k'],
        ['authorization', 'Bearer configured'],
        ['accept', 'text/event-stream'],
        ['mcp-protocol-version', '2025-11-25'],
        ['mcp-session-id', 's1'],
      ],
    ],
    [
      "the session's DELETE: its id, nothing about a body",
      { http: 'DELETE', session: { version: '2025-11-25', sessionId: 's1' } },
      [
        ['x-api-key', 'k'],
        ['authorization', 'Bearer configured'],
        ['mcp-protocol-version', '2025-11-25'],
        ['mcp-session-id', 's1'],
      ],
    ],
    [
      'initialize, before the session has an id',
      { http: 'POST', session: { version: '2025-11-25' } },
      [
        ['x-api-key', 'k'],
        ['authorization', 'Bearer configured'],
        ['content-type', 'application/json'],
        ['accept', 'application/json, text/event-stream'],
        ['mcp-protocol-version', '2025-11-25'],
      ],
    ],
  ] as const)('%s', (_what, req, expected) => {
    expect(pairs(outboundHeaders(CONFIGURED, req))).toEqual(expected)
  })

  it('takes the headers it owns out of the base, in any case, so none is sent twice or claimed', () => {
    const base = [
      'Content-Type', 'text/plain',
      'ACCEPT', '*/*',
      'Content-Length', '9',
      'Last-Event-ID', '7',
      'MCP-Protocol-Version', '2024-11-05',
      'Mcp-Session-Id', 'other',
      'Mcp-Method', 'tools/call',
      'Mcp-Name', 'rm',
      'x-forwarded-for', '192.0.2.1',
    ] // prettier-ignore
    const out = outboundHeaders(base, {
      http: 'GET',
      session: { version: '2025-11-25', sessionId: 's' },
    })
    expect(pairs(out)).toEqual([
      ['x-forwarded-for', '192.0.2.1'],
      ['accept', 'text/event-stream'],
      ['mcp-protocol-version', '2025-11-25'],
      ['mcp-session-id', 's'],
    ])
  })

  it('drops Mcp-Param-* in a 2025-era session, which that era does not have, and keeps them in 2026', () => {
    const base = ['Mcp-Param-Region', 'eu']
    expect(
      outboundHeaders(base, { http: 'POST', session: { version: '2025-11-25' } }),
    ).not.toContain('Mcp-Param-Region')
    expect(outboundHeaders(base, { http: 'POST', method: 'tools/call' })).toContain(
      'Mcp-Param-Region',
    )
  })
})

describe('modernEnvelope', () => {
  it('names the version, the client and its capabilities, in the official client order', () => {
    const env = modernEnvelope({ name: 'mcp-edge', version: '1.2.3' }, { roots: {} })
    expect(Object.keys(env)).toEqual([
      'io.modelcontextprotocol/protocolVersion',
      'io.modelcontextprotocol/clientInfo',
      'io.modelcontextprotocol/clientCapabilities',
    ])
    expect(env).toEqual({
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'mcp-edge', version: '1.2.3' },
      'io.modelcontextprotocol/clientCapabilities': { roots: {} },
    })
  })
})
