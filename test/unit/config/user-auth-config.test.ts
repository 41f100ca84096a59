import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, parseConfigText } from '../../../src/runtime/load.js'

/** `mcp-edge check` and the loader refuse userAuth and introspection set up wrong (docs/auth.md). */
function problems(config: Record<string, unknown>): string[] {
  try {
    parseConfigText(stringify(config), { dir: process.cwd(), env: {} })
    return []
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    return err.message.split('\n')
  }
}

const KEY = randomBytes(32).toString('base64')
const USER_AUTH = { issuer: 'https://as.example.com', clientId: 'gw' }
const server = (extra: Record<string, unknown> = {}) => ({
  upstreams: [{ url: 'https://tracker.example.com/mcp' }],
  userAuth: USER_AUTH,
  ...extra,
})
const AUTH = { publicUrl: 'https://mcp.example.com', jwt: { issuer: 'https://idp.example.com' } }
const TOKENS = { key: KEY, login: { clientId: 'connect' } }

describe('userAuth and introspection config checks', () => {
  it('accepts userAuth with auth.jwt and userTokens', () => {
    expect(problems({ auth: AUTH, userTokens: TOKENS, servers: { t: server() } })).toEqual([])
  })

  it('refuses userAuth without auth.jwt, or without userTokens', () => {
    const noAuth = problems({ userTokens: TOKENS, servers: { t: server() } })
    expect(noAuth.join('\n')).toContain('servers.t.userAuth: needs auth.jwt')
    const opaqueOnly = problems({
      auth: {
        publicUrl: 'https://mcp.example.com',
        introspection: { clientId: 'gw', clientSecret: 's', issuer: 'https://idp.example.com' },
      },
      userTokens: TOKENS,
      servers: { t: server() },
    })
    expect(opaqueOnly.join('\n')).toContain('servers.t.userAuth: needs auth.jwt')
    const noKey = problems({ auth: AUTH, servers: { t: server() } })
    expect(noKey.join('\n')).toContain('servers.t.userAuth: needs userTokens.key')
  })

  it('refuses a key that is not 32 bytes, a userAuth with another credential, memory with workers', () => {
    const short = problems({
      auth: AUTH,
      userTokens: { ...TOKENS, key: randomBytes(16).toString('base64') },
      servers: { t: server() },
    })
    expect(short.join('\n')).toContain('expected 32 bytes')
    const both = problems({
      auth: AUTH,
      userTokens: TOKENS,
      servers: { t: server({ headers: { Authorization: 'Bearer x' } }) },
    })
    expect(both.join('\n')).toContain('conflicts with userAuth')
    const workers = problems({
      auth: AUTH,
      userTokens: TOKENS,
      workers: 2,
      servers: { t: server() },
    })
    expect(workers.join('\n')).toContain('userTokens.redis: needed with workers')
    const endpoints = problems({
      auth: AUTH,
      userTokens: TOKENS,
      servers: { t: server({ userAuth: { clientId: 'gw' } }) },
    })
    expect(endpoints.join('\n')).toContain('set issuer, or authorizationEndpoint and tokenEndpoint')
  })

  it('auth needs jwt or introspection; introspection alone needs its issuer', () => {
    const neither = problems({
      auth: { publicUrl: 'https://mcp.example.com' },
      servers: { t: { upstreams: [{ url: 'https://x.example.com' }] } },
    })
    expect(neither.join('\n')).toContain('set jwt, introspection, or both')
    const noIssuer = problems({
      auth: {
        publicUrl: 'https://mcp.example.com',
        introspection: { clientId: 'gw', clientSecret: 's' },
      },
      servers: { t: { upstreams: [{ url: 'https://x.example.com' }] } },
    })
    expect(noIssuer.join('\n')).toContain('auth.introspection.issuer: needed without auth.jwt')
  })
})
