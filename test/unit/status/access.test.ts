import { describe, expect, it } from 'vitest'
import { AdminAuth, cookieValue } from '../../../src/status/auth.js'
import { exposureWarnings, isLoopback } from '../../../src/status/exposure.js'
import { hostAllowed } from '../../../src/status/routes.js'

const TOKEN = 'a-long-admin-token-for-tests'

describe('AdminAuth', () => {
  it('without a token, lets every request read', () => {
    const auth = new AdminAuth(undefined)
    expect(auth.required).toBe(false)
    expect(auth.allows({})).toBe(true)
  })
  it('with one, takes the bearer token or the login cookie, nothing else', () => {
    const auth = new AdminAuth(TOKEN)
    expect(auth.allows({})).toBe(false)
    expect(auth.allows({ authorization: `Bearer ${TOKEN}` })).toBe(true)
    expect(auth.allows({ authorization: `bearer ${TOKEN}` })).toBe(true)
    expect(auth.allows({ authorization: `Bearer ${TOKEN}x` })).toBe(false)
    expect(auth.allows({ authorization: `Basic ${TOKEN}` })).toBe(false)
    const login = auth.login(TOKEN)
    if (!('cookie' in login)) throw new Error('login failed')
    expect(login.cookie).toMatch(/HttpOnly; SameSite=Strict; Path=\//)
    // The cookie is not the token: a copied cookie names no credential.
    expect(login.cookie).not.toContain(TOKEN)
    const value = login.cookie.split(';')[0] ?? ''
    expect(auth.allows({ cookie: `other=1; ${value}` })).toBe(true)
    expect(auth.allows({ cookie: `${value}x` })).toBe(false)
    expect(auth.allows({ cookie: `mcp_edge_admin=${TOKEN}` })).toBe(false)
  })
  it('refuses logins past 20 failures a minute, whatever the token, then takes them again', () => {
    let now = 0
    const auth = new AdminAuth(TOKEN, () => now)
    for (let i = 0; i < 20; i++) expect(auth.login('wrong')).toEqual({ throttled: false })
    expect(auth.login(TOKEN)).toEqual({ throttled: true })
    now += 60_000
    expect('cookie' in auth.login(TOKEN)).toBe(true)
  })
  it('reads one cookie out of a Cookie header', () => {
    expect(cookieValue('a=1; b = 2 ;c=3', 'b')).toBe('2')
    expect(cookieValue('ab=1', 'a')).toBeUndefined()
    expect(cookieValue(undefined, 'a')).toBeUndefined()
  })
})

describe('where the admin listener answers', () => {
  it('a loopback listener answers loopback Host names only (DNS rebinding)', () => {
    for (const host of ['127.0.0.1:9090', 'localhost:9090', '[::1]:9090', '127.1.2.3', 'localhost'])
      expect(hostAllowed(host)).toBe(true)
    for (const host of [
      'evil.example:9090',
      '127.0.0.1.evil.example',
      'localhost.evil',
      '',
      undefined,
    ])
      expect(hostAllowed(host)).toBe(false)
  })
  it('warns about a listener other machines reach without admin.token', () => {
    expect(isLoopback('127.0.0.1')).toBe(true)
    expect(isLoopback('::1')).toBe(true)
    expect(isLoopback('0.0.0.0')).toBe(false)
    expect(exposureWarnings({ host: '127.0.0.1' })).toEqual([])
    expect(exposureWarnings({ host: '0.0.0.0', token: TOKEN })).toEqual([])
    expect(exposureWarnings({ host: '0.0.0.0' })[0]).toContain('without admin.token')
  })
})
