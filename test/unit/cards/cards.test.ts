import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { compileAuth } from '../../../src/auth/compile.js'
import { cardsProblems, compileCards } from '../../../src/cards/build.js'
import { cardAnswer, catalogAnswer, matches } from '../../../src/cards/serve.js'
import { configSchema } from '../../../src/config/schema.js'

const BACKEND = 'http://10.1.2.3:9000/internal/mcp'
/** A card without a version of its own gives the gateway's, from its package.json. */
const { version: GATEWAY_VERSION } = JSON.parse(
  readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
) as { version: string }

function config(extra: Record<string, unknown> = {}) {
  return configSchema.parse({
    servers: {
      w: { upstreams: [{ url: BACKEND }], headers: { authorization: 'Bearer backend-secret' } },
      old: { upstreams: [{ url: BACKEND }], legacyClients: 'reject' },
    },
    virtualServers: { v: { members: ['w', 'old'] } },
    ...extra,
  })
}

describe('If-None-Match (RFC 9110 §13.1.2)', () => {
  it.each([
    ['"a"', true],
    ['W/"a"', true],
    [' "b" , "a" ', true],
    ['*', true],
    ['"b"', false],
    ['a', false],
    ['"A"', false],
    ['', false],
  ])('%j matches "a": %s', (header, expected) => {
    expect(matches(header, '"a"')).toBe(expected)
  })

  it('compares at most 32 tags', () => {
    const many = Array.from({ length: 40 }, (_, i) => `"x${i}"`)
    expect(matches([...many.slice(0, 31), '"a"'].join(','), '"a"')).toBe(true)
    expect(matches([...many, '"a"'].join(','), '"a"')).toBe(false)
  })
})

describe('compileCards', () => {
  it('is off without a public URL, and when disabled', () => {
    expect(compileCards(config(), undefined)).toBeUndefined()
    const off = config({ cards: { enabled: false, publicUrl: 'https://gw.example' } })
    expect(compileCards(off, undefined)).toBeUndefined()
  })

  it('builds one card per listed endpoint from the gateway config only', () => {
    const set = compileCards(config({ cards: { publicUrl: 'https://gw.example/' } }), undefined)
    expect([...(set?.cards.keys() ?? [])]).toEqual(['w', 'old', 'v'])
    const card = JSON.parse(set?.cards.get('old')?.body.toString() ?? '{}') as Record<
      string,
      unknown
    >
    expect(card).toEqual({
      $schema: 'https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json',
      name: 'example.gw/old',
      version: GATEWAY_VERSION,
      description: 'An MCP server reached through this gateway.',
      remotes: [
        {
          type: 'streamable-http',
          url: 'https://gw.example/mcp/old',
          supportedProtocolVersions: ['2026-07-28'],
        },
      ],
    })
    for (const doc of [...(set?.cards.values() ?? []), set?.catalog]) {
      const text = doc?.body.toString() ?? ''
      expect(text).not.toContain('10.1.2.3')
      expect(text).not.toContain('9000')
      expect(text).not.toContain('backend-secret')
      expect(text).not.toContain('internal')
    }
  })

  it('leaves unlisted endpoints out of both documents', () => {
    const c = config({ cards: { publicUrl: 'https://gw.example' } })
    const hidden = configSchema.parse({
      ...c,
      servers: { ...c.servers, old: { ...c.servers.old, card: { listed: false } } },
      virtualServers: { v: { ...c.virtualServers.v, card: { listed: false } } },
    })
    const set = compileCards(hidden, undefined)
    expect([...(set?.cards.keys() ?? [])]).toEqual(['w'])
    expect(set?.catalog.body.toString()).not.toMatch(/old|"v"|:v"/)
    expect(cardAnswer(set, 'old', undefined)).toBeUndefined()
    expect(cardAnswer(set, 'v', undefined)).toBeUndefined()
  })

  it('names the RFC 9728 metadata and required scopes with auth', () => {
    const c = configSchema.parse({
      auth: {
        publicUrl: 'https://gw.example/edge',
        jwt: { issuer: 'https://idp.example', jwksUrl: 'https://idp.example/jwks' },
      },
      servers: { w: { upstreams: [{ url: BACKEND }], requiredScopes: ['s1'] } },
    })
    const set = compileCards(c, compileAuth(c, process.cwd()))
    const card = JSON.parse(set?.cards.get('w')?.body.toString() ?? '{}') as Record<string, unknown>
    expect(card._meta).toEqual({
      'mcp-edge/authorization': {
        resource: 'https://gw.example/edge/mcp/w',
        resourceMetadata: 'https://gw.example/.well-known/oauth-protected-resource/edge/mcp/w',
        scopesRequired: ['s1'],
      },
    })
  })

  it('refuses a second public URL next to auth.publicUrl', () => {
    const c = configSchema.parse({
      auth: {
        publicUrl: 'https://gw.example',
        jwt: { issuer: 'https://idp.example', jwksUrl: 'https://idp.example/jwks' },
      },
      cards: { publicUrl: 'https://other.example' },
      servers: { w: { upstreams: [{ url: BACKEND }] } },
    })
    expect(cardsProblems(c)).toEqual([
      'cards.publicUrl: leave it out with auth: (the cards use auth.publicUrl)',
    ])
    expect(() => compileCards(c, undefined)).toThrow(/cards.publicUrl/)
    const q = config({ cards: { publicUrl: 'https://gw.example/?x=1' } })
    expect(cardsProblems(q)).toEqual(['cards.publicUrl: no query, fragment or userinfo allowed'])
  })

  it.each(['^1.2.3', '~1.2', '>=1.0.0', '1.x', '1.*'])('refuses the version range %s', (v) => {
    const r = configSchema.safeParse({
      servers: { w: { upstreams: [{ url: BACKEND }], card: { version: v } } },
    })
    expect(r.success).toBe(false)
  })

  it('answers 304 for its own tag and 200 otherwise; strong tags differ per document', () => {
    const set = compileCards(config({ cards: { publicUrl: 'https://gw.example' } }), undefined)
    const first = cardAnswer(set, 'w', undefined)
    expect(first?.status).toBe(200)
    const etag = first?.headers.etag ?? ''
    expect(cardAnswer(set, 'w', etag)).toMatchObject({ status: 304, body: undefined })
    expect(cardAnswer(set, 'w', '"nope"')?.status).toBe(200)
    expect(catalogAnswer(set, undefined)?.headers.etag).not.toBe(etag)
    expect(cardAnswer(set, 'W', undefined)).toBeUndefined() // exact bytes only
  })
})
