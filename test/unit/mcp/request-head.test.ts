import { describe, expect, it } from 'vitest'
import { compileHeaderRules, upstreamHeaderProblems } from '../../../src/mcp/owned-headers.js'
import { isJsonMediaType, readRequestHead } from '../../../src/mcp/request-head.js'

/** rawHeaders from [name, value] pairs. */
const raw = (...pairs: (readonly [string, string])[]): string[] => pairs.flat()

describe('readRequestHead', () => {
  it('reads the MCP headers whatever their case and keeps Mcp-Param-* for forwarding', () => {
    const head = readRequestHead(
      raw(
        ['Host', 'gw'],
        ['MCP-Protocol-Version', '2026-07-28'],
        ['mcp-method', 'tools/call'],
        ['Mcp-Name', 'echo'],
        ['Mcp-Param-Region', 'eu'],
        ['Content-Type', 'application/json'],
        ['Content-Length', '12'],
      ),
    )
    expect(head).toMatchObject({
      version: '2026-07-28',
      method: 'tools/call',
      name: 'echo',
      host: 'gw',
      contentLength: 12,
    })
    expect(head.forward).toEqual(
      raw(
        ['MCP-Protocol-Version', '2026-07-28'],
        ['mcp-method', 'tools/call'],
        ['Mcp-Name', 'echo'],
        ['Mcp-Param-Region', 'eu'],
        ['Content-Type', 'application/json'],
      ),
    )
  })

  it('never forwards credentials, hop-by-hop or gateway-owned identity headers', () => {
    const head = readRequestHead(
      raw(
        ['Authorization', 'Bearer secret'],
        ['Cookie', 'a=b'],
        ['Connection', 'keep-alive, X-Hop'],
        ['X-Hop', '1'],
        ['Keep-Alive', 'timeout=5'],
        ['TE', 'trailers'],
        ['Upgrade', 'h2c'],
        ['Proxy-Authorization', 'x'],
        ['X-Forwarded-For', '10.0.0.1'],
        ['Forwarded', 'for=1.2.3.4'],
        ['Accept-Encoding', 'gzip'],
        ['Accept', 'application/json, text/event-stream'],
      ),
    )
    expect(head.authorization).toBe('Bearer secret')
    expect(head.forward).toEqual(['Accept', 'application/json, text/event-stream'])
  })

  it('flags a second copy of a routing or auth header', () => {
    expect(readRequestHead(raw(['Mcp-Name', 'a'], ['mcp-name', 'b'])).duplicate).toBe('mcp-name')
    const auth = raw(['Authorization', 'a'], ['authorization', 'b'])
    expect(readRequestHead(auth).duplicate).toBe('authorization')
    expect(readRequestHead(raw(['Accept', 'a'], ['Accept', 'b'])).duplicate).toBeUndefined()
  })
})

describe('Connection (RFC 9110 §7.6.1)', () => {
  const base = raw(
    ['Mcp-Method', 'tools/call'],
    ['Mcp-Name', 'echo'],
    ['X-Foo', '1'],
    ['Accept', '*/*'],
  )
  const withConnection = (...values: string[]) => [
    ...base,
    ...values.flatMap((v) => ['Connection', v]),
  ]

  it.each([
    ['Mcp-Name', 'mcp-name'],
    ['close, MCP-Protocol-Version', 'mcp-protocol-version'],
    [' keep-alive ,\tMcp-Param-Region ', 'mcp-param-region'],
    ['x-foo, Content-Type', 'content-type'],
    ['X-Forwarded-Anything', 'x-forwarded-anything'],
    ['Host', 'host'],
    ['authorization', 'authorization'],
    ['Origin', 'origin'],
    ['Transfer-Encoding', 'transfer-encoding'],
  ])('%j names an owned header', (connection, owned) => {
    expect(readRequestHead(withConnection(connection)).nominatesOwned).toBe(owned)
  })

  it('joins several Connection headers into one list', () => {
    expect(readRequestHead(withConnection('keep-alive', 'Mcp-Name')).nominatesOwned).toBe(
      'mcp-name',
    )
    expect(readRequestHead(withConnection('Mcp-Method', 'close')).nominatesOwned).toBe('mcp-method')
  })

  it('owns the names a server configures and its hash header, on that server only', () => {
    const rules = compileHeaderRules(['X-Api-Key'], 'x-tenant')
    expect(readRequestHead(withConnection('X-API-KEY'), rules).nominatesOwned).toBe('x-api-key')
    expect(readRequestHead(withConnection('x-tenant'), rules).nominatesOwned).toBe('x-tenant')
    expect(readRequestHead(withConnection('x-api-key')).nominatesOwned).toBeUndefined()
  })

  it('drops other nominated headers and keeps the rest in order', () => {
    const head = readRequestHead(withConnection('keep-alive, X-FOO, , Cookie'))
    expect(head.nominatesOwned).toBeUndefined()
    expect(head.forward).toEqual(
      raw(['Mcp-Method', 'tools/call'], ['Mcp-Name', 'echo'], ['Accept', '*/*']),
    )
  })

  it.each(['keep-alive', 'Keep-Alive', 'close', 'CLOSE'])('%s alone changes nothing', (value) => {
    const head = readRequestHead(withConnection(value))
    expect(head.nominatesOwned).toBeUndefined()
    expect(head.forward).toEqual(base)
  })
})

describe('headers the gateway sets replace client copies', () => {
  it('drops every client copy of a configured name, whatever its case', () => {
    const rules = compileHeaderRules(['X-Api-Key'], undefined)
    const sent = raw(['X-Api-Key', 'a'], ['x-api-key', 'b'], ['X-API-KEY', 'c'], ['Accept', '*/*'])
    expect(readRequestHead(sent, rules).forward).toEqual(['Accept', '*/*'])
  })

  it('drops the whole X-Forwarded-* family, Forwarded and X-Real-IP', () => {
    const head = readRequestHead(
      raw(
        ['X-Forwarded-For', '1'],
        ['x-forwarded-proto', 'https'],
        ['X-Forwarded-Host', 'h'],
        ['X-Forwarded-Prefix', '/p'],
        ['X-Forwarded-Server', 's'],
        ['Forwarded', 'for=1'],
        ['X-Real-IP', '1'],
        ['X-Forwardedness', 'kept'],
      ),
    )
    expect(head.forward).toEqual(['X-Forwardedness', 'kept'])
  })

  it('drops underscore twins of owned and configured names (CGI reads both as one)', () => {
    const rules = compileHeaderRules(['X-Api-Key'], undefined)
    const sent = raw(
      ['X_Api_Key', 'a'],
      ['Mcp_Method', 'tools/call'],
      ['mcp_name', 'x'],
      ['X_Forwarded_For', '1'],
      ['Content_Type', 'text/plain'],
      ['X_Custom', 'kept'],
    )
    expect(readRequestHead(sent, rules).forward).toEqual(['X_Custom', 'kept'])
  })

  it('refuses configured names the gateway owns, and the same name twice', () => {
    expect(upstreamHeaderProblems('s', { 'X-Api-Key': 'k', Authorization: 'Bearer t' })).toEqual([])
    const owned = [
      'Mcp-Method',
      'MCP-Protocol-Version',
      'mcp-name',
      'Mcp-Param-X',
      'Host',
      'Content-Length',
      'Content-Type',
      'Transfer-Encoding',
      'Connection',
      'X-Forwarded-For',
      'X-Forwarded-Proto',
      'X-Forwarded-Host',
    ]
    for (const name of owned) {
      expect(upstreamHeaderProblems('s', { [name]: 'v' }), name).toEqual([
        `servers.s.headers.${name}: the gateway owns this header and cannot send a configured value`,
      ])
    }
    expect(upstreamHeaderProblems('s', { 'X-Api-Key': 'a', 'x-api-key': 'b' })).toEqual([
      'servers.s.headers.x-api-key: set twice (header names are case-insensitive)',
    ])
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
