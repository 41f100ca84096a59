import { describe, expect, it } from 'vitest'
import { AdminAuth } from '../../../src/status/auth.js'
import { exposureWarnings, isLoopback } from '../../../src/status/exposure.js'
import { SESSION_MS, SessionTable } from '../../../src/status/sessions.js'
import { FailureThrottle, MAX_FAILURES, sourceOf } from '../../../src/status/throttle.js'
import { hostAllowed } from '../../../src/status/web/app.js'

const TOKEN = 'a-long-admin-token-for-tests'
const HERE = '127.0.0.1'

/** A sign-in that must succeed: its session id. */
function signIn(auth: AdminAuth, peer = HERE): string {
  const result = auth.signIn(peer, TOKEN)
  if (!result.ok) throw new Error(`sign-in failed: ${result.why}`)
  return result.session
}

describe('AdminAuth', () => {
  it('without a token, lets every request read and offers no sign-in', () => {
    const auth = new AdminAuth(undefined)
    expect(auth.required).toBe(false)
    expect(auth.check(HERE, {})).toEqual({ ok: true })
    expect(auth.signIn(HERE, TOKEN)).toEqual({ ok: false, why: 'no-token' })
  })

  it('with one, takes the bearer token or a session, nothing else', () => {
    const auth = new AdminAuth(TOKEN)
    expect(auth.check(HERE, {})).toEqual({ ok: false, why: 'missing' })
    expect(auth.check(HERE, { bearer: TOKEN })).toEqual({ ok: true })
    expect(auth.check(HERE, { bearer: `${TOKEN}x` })).toEqual({ ok: false, why: 'wrong' })
    expect(auth.check(HERE, { bearer: '' })).toEqual({ ok: false, why: 'wrong' })
    const session = signIn(auth)
    expect(session).not.toContain(TOKEN)
    expect(auth.check(HERE, { session })).toEqual({ ok: true })
    expect(auth.check(HERE, { session: `${session}x` })).toEqual({ ok: false, why: 'wrong' })
    // The token is no session: a cookie names one sign-in, never the credential.
    expect(auth.check(HERE, { session: TOKEN })).toEqual({ ok: false, why: 'wrong' })
    // A bearer header decides alone, even next to a good session.
    expect(auth.check(HERE, { bearer: 'wrong', session })).toEqual({ ok: false, why: 'wrong' })
  })

  it('keeps sessions across a reload with the same token and ends them all on a new one', () => {
    const auth = new AdminAuth(TOKEN)
    const session = signIn(auth)
    auth.setToken(TOKEN)
    expect(auth.check(HERE, { session })).toEqual({ ok: true })
    auth.setToken('another-long-admin-token')
    expect(auth.check(HERE, { session })).toEqual({ ok: false, why: 'wrong' })
    expect(auth.check(HERE, { bearer: TOKEN })).toEqual({ ok: false, why: 'wrong' })
    expect(auth.check(HERE, { bearer: 'another-long-admin-token' })).toEqual({ ok: true })
    auth.setToken(undefined)
    expect(auth.required).toBe(false)
    expect(auth.check(HERE, {})).toEqual({ ok: true })
  })

  it('throttles a source past 20 failures a minute, whatever way it presents tokens', () => {
    let now = 0
    const auth = new AdminAuth(TOKEN, () => now)
    for (let i = 0; i < 7; i++) expect(auth.check('10.0.0.1', { bearer: 'x' }).ok).toBe(false)
    for (let i = 0; i < 7; i++) expect(auth.check('10.0.0.1', { session: 'x' }).ok).toBe(false)
    for (let i = 0; i < 6; i++) expect(auth.signIn('10.0.0.1', 'x').ok).toBe(false)
    expect(auth.signIn('10.0.0.1', TOKEN)).toEqual({ ok: false, why: 'throttled', retryAfter: 60 })
    expect(auth.check('10.0.0.1', { bearer: TOKEN })).toEqual({
      ok: false,
      why: 'throttled',
      retryAfter: 60,
    })
    // Another source is untouched, and a good session from the throttled one still reads.
    const session = signIn(auth, '10.0.0.2')
    expect(auth.check('10.0.0.1', { session })).toEqual({ ok: true })
    now += 59_500
    expect(auth.check('10.0.0.1', { bearer: TOKEN })).toMatchObject({ retryAfter: 1 })
    now += 500
    expect(auth.check('10.0.0.1', { bearer: TOKEN })).toEqual({ ok: true })
  })
})

describe('SessionTable', () => {
  it('ends a session SESSION_MS after it began, on its own clock', () => {
    let now = 1000
    const table = new SessionTable(() => now)
    const { id, seconds } = table.open()
    expect(seconds).toBe(8 * 3600)
    now += SESSION_MS - 1
    expect(table.valid(id)).toBe(true)
    now += 1
    expect(table.valid(id)).toBe(false)
    expect(table.size).toBe(0)
  })

  it('holds at most 64 sessions: one more sign-in ends the oldest', () => {
    const table = new SessionTable(() => 0)
    const ids = Array.from({ length: 65 }, () => table.open().id)
    expect(new Set(ids).size).toBe(65)
    expect(table.size).toBe(64)
    expect(table.valid(ids[0] ?? '')).toBe(false)
    expect(ids.slice(1).every((id) => table.valid(id))).toBe(true)
  })

  it('ends one session on sign-out and every one on clear', () => {
    const table = new SessionTable()
    const a = table.open().id
    const b = table.open().id
    table.end(a)
    expect([table.valid(a), table.valid(b)]).toEqual([false, true])
    table.clear()
    expect(table.valid(b)).toBe(false)
  })
})

describe('FailureThrottle', () => {
  it('counts an IPv6 /64 as one source, an IPv4-mapped address as its IPv4 address', () => {
    expect(sourceOf('2001:db8:1:2:aaaa::1')).toBe('2001:0db8:0001:0002::/64')
    expect(sourceOf('2001:db8:1:2:bbbb:cccc:dddd:eeee')).toBe('2001:0db8:0001:0002::/64')
    expect(sourceOf('2001:db8::1')).toBe('2001:0db8:0000:0000::/64')
    expect(sourceOf('::1')).toBe('0000:0000:0000:0000::/64')
    expect(sourceOf('fe80::1%eth0')).toBe('fe80:0000:0000:0000::/64')
    expect(sourceOf('::ffff:10.1.2.3')).toBe('10.1.2.3')
    expect(sourceOf('10.1.2.3')).toBe('10.1.2.3')
    const throttle = new FailureThrottle(() => 0)
    for (let i = 0; i < MAX_FAILURES; i++) throttle.fail(`2001:db8:1:2::${i.toString(16)}`)
    expect(throttle.wait('2001:db8:1:2:ffff::9')).toBe(60)
    expect(throttle.wait('2001:db8:1:3::1')).toBe(0)
  })

  it('stays bounded at 4096 sources, forgetting the one that failed longest ago', () => {
    const throttle = new FailureThrottle(() => 0)
    for (let i = 0; i < 100; i++) throttle.fail('192.0.2.1')
    expect(throttle.wait('192.0.2.1')).toBe(60)
    const other = (i: number): string => `10.0.${(i >> 8) & 255}.${i & 255}`
    for (let i = 0; i < 4095; i++) throttle.fail(other(i))
    expect(throttle.sources).toBe(4096)
    expect(throttle.wait('192.0.2.1')).toBe(60)
    throttle.fail(other(4095))
    expect(throttle.sources).toBe(4096)
    expect(throttle.wait('192.0.2.1')).toBe(0)
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
