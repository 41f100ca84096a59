import { describe, expect, it } from 'vitest'
import { isJsonMediaType, readRequestHead } from '../../../src/mcp/request-head.js'

describe('readRequestHead', () => {
  it('reads the MCP headers whatever their case and keeps Mcp-Param-* for forwarding', () => {
    const head = readRequestHead([
      'Host', 'gw', 'MCP-Protocol-Version', '2026-07-28', 'mcp-method', 'tools/call',
      'Mcp-Name', 'echo', 'Mcp-Param-Region', 'eu', 'Content-Type', 'application/json',
      'Content-Length', '12',
    ])
    expect(head).toMatchObject({ version: '2026-07-28', method: 'tools/call', name: 'echo', host: 'gw', contentLength: 12 })
    expect(head.forward).toEqual([
      'MCP-Protocol-Version', '2026-07-28', 'mcp-method', 'tools/call', 'Mcp-Name', 'echo',
      'Mcp-Param-Region', 'eu', 'Content-Type', 'application/json',
    ])
  })

  it('never forwards credentials, hop-by-hop or gateway-owned identity headers', () => {
    const head = readRequestHead([
      'Authorization', 'Bearer secret', 'Cookie', 'a=b', 'Connection', 'keep-alive, X-Hop',
      'X-Hop', '1', 'Keep-Alive', 'timeout=5', 'TE', 'trailers', 'Upgrade', 'h2c',
      'Proxy-Authorization', 'x', 'X-Forwarded-For', '10.0.0.1', 'Forwarded', 'for=1.2.3.4',
      'Accept-Encoding', 'gzip', 'Accept', 'application/json, text/event-stream',
    ])
    expect(head.authorization).toBe('Bearer secret')
    expect(head.forward).toEqual(['Accept', 'application/json, text/event-stream'])
  })

  it('flags a second copy of a routing or auth header', () => {
    expect(readRequestHead(['Mcp-Name', 'a', 'mcp-name', 'b']).duplicate).toBe('mcp-name')
    expect(readRequestHead(['Authorization', 'a', 'authorization', 'b']).duplicate).toBe('authorization')
    expect(readRequestHead(['Accept', 'a', 'Accept', 'b']).duplicate).toBeUndefined()
  })
})

describe('isJsonMediaType', () => {
  it.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['Application/JSON', true],
    ['text/plain', false],
    ['application/jsonx', false],
    [undefined, false],
  ])('%s → %s', (ct, ok) => {
    expect(isJsonMediaType(ct)).toBe(ok)
  })
})
