import { describe, expect, it } from 'vitest'
import { keyParamsOf } from '../../../src/cache/canonical.js'
import {
  authContextOf,
  cacheKey,
  invalidationPrefixes,
  serverTag,
  type AuthContext,
  type KeyParts,
} from '../../../src/cache/key.js'

const server = serverTag('app', ['http://127.0.0.1:1/mcp'])
const envelope = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
}
/** Key parts of a request whose params are `params` plus `meta` merged into the envelope. */
const parts = (
  params: Record<string, unknown> = {},
  over: Partial<KeyParts> = {},
  meta: Record<string, unknown> = {},
): KeyParts => ({
  server,
  method: 'tools/list',
  version: '2026-07-28',
  params: keyParamsOf(JSON.stringify({ params: { ...params, _meta: { ...envelope, ...meta } } })),
  uri: typeof params.uri === 'string' ? params.uri : undefined,
  ...over,
})
const alice: AuthContext = {
  issuer: 'https://as.example',
  subject: 'alice',
  audience: ['https://gw.example/mcp/app'],
  scopes: ['mcp:read', 'mcp:tools'],
  clientId: undefined,
}

describe('cacheKey', () => {
  it('ignores _meta but the client capabilities: trace context, log level, client info', () => {
    const plain = cacheKey(parts())
    const traced = cacheKey(
      parts(
        {},
        {},
        {
          traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
          progressToken: 'p-1',
          'io.modelcontextprotocol/logLevel': 'debug',
          'io.modelcontextprotocol/clientInfo': { name: 'other', version: '9' },
        },
      ),
    )
    expect(traced).toBe(plain)
    const caps = { 'io.modelcontextprotocol/clientCapabilities': { sampling: {} } }
    expect(cacheKey(parts({}, {}, caps))).not.toBe(plain)
  })

  it('gives each page, resource, method, server and protocol version its own entry', () => {
    const keys = [
      cacheKey(parts()),
      cacheKey(parts({ cursor: 'A' })),
      cacheKey(parts({ cursor: 'B' })),
      cacheKey(parts({}, { version: '2025-11-25' })),
      cacheKey(parts({}, { method: 'prompts/list' })),
      cacheKey(parts({}, { server: serverTag('other', ['http://127.0.0.1:1/mcp']) })),
      cacheKey(parts({}, { server: serverTag('app', ['http://127.0.0.1:2/mcp']) })),
      cacheKey(parts({ uri: 'docs://a' }, { method: 'resources/read' })),
      cacheKey(parts({ uri: 'docs://b' }, { method: 'resources/read' })),
      cacheKey({ ...parts(), params: keyParamsOf('{"jsonrpc":"2.0"}') }),
    ]
    expect(new Set(keys).size).toBe(keys.length)
  })

  it('keys resources/read by URI so one resource can be found for invalidation', () => {
    const a = cacheKey(parts({ uri: 'docs://a' }, { method: 'resources/read' }))
    const a2 = cacheKey(parts({ uri: 'docs://a', extra: 1 }, { method: 'resources/read' }))
    expect(a.split(':').slice(0, 3)).toEqual(a2.split(':').slice(0, 3))
    expect(a).not.toBe(a2)
    expect(a.startsWith(`${server}:resources/read:`)).toBe(true)
  })

  it('keys skills/get by the SKILL.md URI; a change to a skill file drops its skill', () => {
    const uri = 'skill://acme/refunds/SKILL.md'
    const key = cacheKey(parts({ uri }, { method: 'skills/get' }))
    const file = { kind: 'resource', uri: 'skill://acme/refunds/examples/a.md' } as const
    const prefixes = invalidationPrefixes(server, file)
    expect(prefixes.some((p) => key.startsWith(p))).toBe(true)
    expect(prefixes).toContain(`${server}:skills/list:`)
    const other = cacheKey(parts({ uri: 'skill://acme/other/SKILL.md' }, { method: 'skills/get' }))
    expect(prefixes.some((p) => other.startsWith(p))).toBe(false)
    // A skill changed, added or removed is told as resources/list_changed.
    const all = invalidationPrefixes(server, { kind: 'resources' })
    expect(all).toEqual(expect.arrayContaining([`${server}:skills/list:`, `${server}:skills/get:`]))
    expect(invalidationPrefixes(server, { kind: 'resource', uri: 'docs://readme' })).toEqual([
      cacheKey(parts({ uri: 'docs://readme' }, { method: 'resources/read' }))
        .split(':')
        .slice(0, 3)
        .join(':') + ':',
    ])
  })

  it('makes private keys per authorization context, independent of scope order', () => {
    const pub = cacheKey(parts())
    const a1 = cacheKey(parts(), alice)
    const a2 = cacheKey(parts(), { ...alice, scopes: ['mcp:tools', 'mcp:read'] })
    expect(a1).not.toBe(pub)
    expect(a2).toBe(a1)
    for (const other of [
      { ...alice, subject: 'bob' },
      { ...alice, issuer: 'https://evil.example' },
      { ...alice, audience: ['https://gw.example/mcp/other'] },
      { ...alice, scopes: ['mcp:read'] },
      { ...alice, clientId: 'another-app' },
    ]) {
      expect(cacheKey(parts(), other)).not.toBe(a1)
    }
  })
  it('keeps an answer stored after a policy filter apart per view, and apart from any context', () => {
    const unfiltered = cacheKey(parts())
    const red = cacheKey(parts({}, { view: '["o:red"]' }))
    expect(new Set([unfiltered, red, cacheKey(parts({}, { view: '["o:blue"]' }))]).size).toBe(3)
    expect(cacheKey(parts({}, { view: '["o:red"]' }))).toBe(red)
    // A view whose text is an authorization context's still does not make a private key.
    const ctxText = JSON.stringify([
      alice.issuer,
      alice.subject,
      [...alice.audience],
      [...alice.scopes].sort(),
      null,
    ])
    expect(cacheKey(parts({}, { view: ctxText }))).not.toBe(cacheKey(parts(), alice))
  })
})

describe('authContextOf', () => {
  it('takes issuer, subject, audience, scopes and the acting client from a principal', () => {
    const ctx = authContextOf({
      issuer: 'https://as.example',
      subject: 'alice',
      claims: { aud: 'https://gw.example', azp: 'app-1' },
      scopes: new Set(['b', 'a']),
    })
    expect(ctx).toEqual({
      issuer: 'https://as.example',
      subject: 'alice',
      audience: ['https://gw.example'],
      scopes: ['b', 'a'],
      clientId: 'app-1',
    })
    expect(authContextOf(undefined)).toBeUndefined()
  })
})
