import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import { connect, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Registry } from 'prom-client'
import { Agent, request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { loadConfigFile } from '../../src/runtime/load.js'
import { startGateway, type RunningGateway } from '../../src/server.js'
import { createStatusPage } from '../../src/status/web/admin-page.js'
import { sendRaw } from '../helpers/raw-socket.js'
import { adminUrl, oneServer, startTestGateway } from '../helpers/gateway.js'
import { selfSigned } from '../helpers/tls.js'

/**
 * The admin listener's trust rules (docs/security.md §The admin listener): one Host rule for
 * every route, sign-in sessions that end, a sign-in throttle no one else can trip for you, and a
 * gateway that is ready only once every listener it was configured with listens. Every request
 * goes over a real socket to the real gateway; clients at different addresses are connections
 * bound to different loopback addresses (127.0.0.0/8 is all loopback on Linux).
 */

const TOKEN = 'admin-token-of-the-security-test'
const OTHER_TOKEN = 'the-rotated-admin-token-of-the-test'
const COOKIE = 'mcp_edge_admin'
const HOURS_8 = 8 * 3600 * 1000
/** A backend nobody calls: the tests here talk to the admin listener only. */
const NOBODY = 'http://127.0.0.1:9/mcp'

interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  readonly text: string
}

interface Ask {
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string
}

/** A client whose connections come from `from` (a loopback address). */
function clientAt(from: string): (method: string, url: string, ask?: Ask) => Promise<Answer> {
  const agent = new Agent({ localAddress: from })
  onTestFinished(() => agent.close())
  return async (method, url, ask = {}) => {
    const res = await request(url, {
      method: method as 'GET',
      dispatcher: agent,
      headers: { ...ask.headers },
      ...(ask.body !== undefined && { body: ask.body }),
    })
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
  }
}

/** The admin session cookie a response sets (name=value), or undefined. */
function sessionCookie(res: Answer): string | undefined {
  const set = res.headers['set-cookie']
  const all = set === undefined ? [] : Array.isArray(set) ? set : [set]
  return all.find((c) => c.startsWith(`${COOKIE}=`))
}

const valueOf = (setCookie: string | undefined): string => (setCookie ?? '').split(';')[0] ?? ''

interface Admin {
  readonly gw: RunningGateway
  readonly url: string
  /** The gateway's admin clock: tests move it. */
  readonly clock: { now: number }
  /** Signs in through the form from `from` with `token`. */
  signIn(token: string, from?: string): Promise<Answer>
}

/** A gateway with `admin.token` on a loopback admin listener, on an admin clock the test moves. */
async function adminGateway(autoClose = true): Promise<Admin> {
  const clock = { now: Date.parse('2026-12-01T08:00:00Z') }
  const gw = await startTestGateway(
    { admin: { host: '127.0.0.1', port: 0, token: TOKEN }, ...oneServer(NOBODY) },
    { start: { admin: { now: () => clock.now } }, autoClose },
  )
  const url = adminUrl(gw)
  return { gw, url, clock, signIn: (t, from = '127.0.0.1') => formSignIn(url, t, from) }
}

/** A browser's form post to /login (same origin, as the page's form sends it). */
function formSignIn(url: string, token: string, from = '127.0.0.1'): Promise<Answer> {
  return clientAt(from)('POST', `${url}/login`, {
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
    body: new URLSearchParams({ token }).toString(),
  })
}

const UNAUTHORIZED = '{"error":"unauthorized"}\n'
const TOO_MANY = '{"error":"too many failed sign-ins; wait a minute"}\n'

describe('one Host rule for every route of a loopback admin listener (RFC 9110 §15.5.20)', () => {
  it('answers a Host that is not loopback 421 on every route, /metrics and unknown paths included', async () => {
    const { url } = await adminGateway()
    const local = clientAt('127.0.0.1')
    const routes: [string, string][] = [
      ['GET', '/'],
      ['GET', '/status.json'],
      ['GET', '/status/events'],
      ['GET', '/readyz'],
      ['GET', '/metrics'],
      ['GET', '/status.css'],
      ['GET', '/status.js'],
      ['GET', '/favicon.svg'],
      ['POST', '/login'],
      ['POST', '/logout'],
      ['GET', '/no-such-page'],
    ]
    for (const [method, path] of routes) {
      const res = await local(method, `${url}${path}`, {
        headers: { host: 'rebound.example:9090', authorization: `Bearer ${TOKEN}` },
      })
      expect({ route: `${method} ${path}`, status: res.status, text: res.text }).toEqual({
        route: `${method} ${path}`,
        status: 421,
        text: 'misdirected request\n',
      })
      expect(res.text).not.toContain('mcp_edge_')
    }
    // An absolute-form target names the authority instead of Host (RFC 9112 §3.2.2): judged too.
    const port = Number(new URL(url).port)
    const absolute = await sendRaw(port, [
      `GET http://rebound.example:${port}/metrics HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`,
    ])
    expect(absolute.status).toBe(421)
    expect(absolute.body).toBe('misdirected request\n')
    // Loopback names still reach it, as a scraper on the same machine does.
    const metrics = await local('GET', `${url}/metrics`)
    expect(metrics.status).toBe(200)
    expect(metrics.text).toContain('mcp_edge_')
  })
})

describe('sign-in sessions (RFC 6265 §4.1.2)', () => {
  it('gives every sign-in its own random session id, HttpOnly, SameSite=Strict, Path=/', async () => {
    const { url, signIn } = await adminGateway()
    const first = await signIn(TOKEN)
    const second = await signIn(TOKEN)
    expect(first.status).toBe(303)
    expect(first.headers['location']).toBe('./')
    const a = sessionCookie(first)
    const b = sessionCookie(second)
    expect(a).toMatch(/; HttpOnly/)
    expect(a).toMatch(/; SameSite=Strict/)
    expect(a).toMatch(/; Path=\//)
    expect(a).toMatch(/; Max-Age=28800/)
    // Served over plain http: a Secure cookie would never be sent back (RFC 6265 §5.4).
    expect(a).not.toMatch(/; Secure/)
    expect(valueOf(a)).not.toBe(valueOf(b))
    expect(valueOf(a)).not.toContain(TOKEN)
    // 256 bits of randomness, base64url.
    expect(valueOf(a)).toMatch(new RegExp(`^${COOKIE}=[A-Za-z0-9_-]{43}$`))
    const local = clientAt('127.0.0.1')
    for (const cookie of [valueOf(a), valueOf(b)])
      expect((await local('GET', `${url}/status.json`, { headers: { cookie } })).status).toBe(200)
  })

  it('marks the cookie Secure when the sign-in came over TLS', async () => {
    // The gateway's admin listener speaks plain http; behind TLS (the same app on an https
    // server here) the cookie must never travel in the clear.
    const page = createStatusPage(
      { collect: () => Promise.resolve({ reports: [], metrics: [] }) },
      {
        admin: { host: '127.0.0.1', token: TOKEN },
        workers: 1,
        startedAt: 0,
        metrics: new Registry(),
      },
    )
    onTestFinished(() => page.close())
    const server = createTlsServer(await selfSigned(), page.listener)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
    const agent = new Agent({ connect: { rejectUnauthorized: false } })
    onTestFinished(() => agent.close())
    const res = await request(`${url}/login`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
      body: new URLSearchParams({ token: TOKEN }).toString(),
    })
    await res.body.dump()
    expect(res.statusCode).toBe(303)
    const cookie = sessionCookie({ status: res.statusCode, headers: res.headers, text: '' })
    expect(cookie).toMatch(/; Secure/)
    expect(cookie).toMatch(/; HttpOnly/)
    // The session opens the status there (503: this page has no gateway process behind it).
    const ready = await request(`${url}/readyz`, {
      dispatcher: agent,
      headers: { cookie: valueOf(cookie) },
    })
    expect(ready.statusCode).toBe(503)
    expect(await ready.body.text()).toBe('{"error":"no gateway process answered"}\n')
  })

  it('ends a session 8 hours after sign-in on the gateway clock, whatever the browser keeps', async () => {
    const { url, clock, signIn } = await adminGateway()
    const cookie = valueOf(sessionCookie(await signIn(TOKEN)))
    const local = clientAt('127.0.0.1')
    clock.now += HOURS_8 - 1000
    expect((await local('GET', `${url}/status.json`, { headers: { cookie } })).status).toBe(200)
    clock.now += 1000
    const late = await local('GET', `${url}/status.json`, { headers: { cookie } })
    expect(late.status).toBe(401)
    expect(late.text).toBe(UNAUTHORIZED)
    // The browser is told to forget it too.
    expect(sessionCookie(late)).toMatch(/Max-Age=0/)
  })

  it('ends a session on sign-out', async () => {
    const { url, signIn } = await adminGateway()
    const cookie = valueOf(sessionCookie(await signIn(TOKEN)))
    const other = valueOf(sessionCookie(await signIn(TOKEN)))
    const local = clientAt('127.0.0.1')
    const out = await local('POST', `${url}/logout`, {
      headers: { cookie, origin: url, 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
    })
    expect(out.status).toBe(303)
    expect(out.headers['location']).toBe('./')
    expect(sessionCookie(out)).toMatch(new RegExp(`^${COOKIE}=;.*Max-Age=0`))
    const after = await local('GET', `${url}/status.json`, { headers: { cookie } })
    expect(after.status).toBe(401)
    expect(after.text).toBe(UNAUTHORIZED)
    const page = await local('GET', `${url}/`, { headers: { cookie } })
    expect(page.status).toBe(401)
    expect(page.text).toContain('name="token"')
    // Only that session ended.
    const kept = await local('GET', `${url}/status.json`, { headers: { cookie: other } })
    expect(kept.status).toBe(200)
  })

  it('ends every session when the gateway restarts', async () => {
    const first = await adminGateway(false)
    const cookie = valueOf(sessionCookie(await first.signIn(TOKEN)))
    await first.gw.close(0)
    const second = await adminGateway()
    const res = await clientAt('127.0.0.1')('GET', `${second.url}/status.json`, {
      headers: { cookie },
    })
    expect(res.status).toBe(401)
    expect(res.text).toBe(UNAUTHORIZED)
  })

  it('ends every session when a reload changes admin.token, and takes the new token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-admin-'))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    const file = join(dir, 'gateway.yaml')
    const write = (token: string, timeoutMs: number): void =>
      writeFileSync(
        file,
        stringify({
          listen: { host: '127.0.0.1', port: 0 },
          admin: { host: '127.0.0.1', port: 0, token },
          log: { level: 'silent' },
          servers: { app: { upstreams: [{ url: NOBODY }], timeouts: { connectMs: timeoutMs } } },
        }),
      )
    write(TOKEN, 2000)
    const gw = await startGateway(loadConfigFile(file))
    onTestFinished(() => gw.close(0))
    const url = adminUrl(gw)
    const local = clientAt('127.0.0.1')
    const cookie = valueOf(sessionCookie(await formSignIn(url, TOKEN)))
    const status = (headers: Record<string, string>) =>
      local('GET', `${url}/status.json`, { headers })
    // A reload that keeps the token keeps the sessions.
    write(TOKEN, 1500)
    await gw.rereadConfig()
    expect(gw.ref.current.config.servers['app']?.timeouts.connectMs).toBe(1500)
    expect((await status({ cookie })).status).toBe(200)
    // A new token ends them, and the old token no longer opens anything.
    write(OTHER_TOKEN, 1500)
    await gw.rereadConfig()
    const ended = await status({ cookie })
    expect(ended.status).toBe(401)
    expect(ended.text).toBe(UNAUTHORIZED)
    const old = await status({ authorization: `Bearer ${TOKEN}` })
    expect(old.status).toBe(401)
    expect(old.text).toBe(UNAUTHORIZED)
    expect((await status({ authorization: `Bearer ${OTHER_TOKEN}` })).status).toBe(200)
    expect((await formSignIn(url, OTHER_TOKEN)).status).toBe(303)
  })
})

describe('the sign-in throttle', () => {
  it('never refuses a correct token because another address guessed wrong', async () => {
    const { url, signIn } = await adminGateway()
    for (let i = 0; i < 20; i++) {
      const wrong = await signIn(`wrong-guess-number-${i}`, '127.0.0.2')
      expect(wrong.status).toBe(401)
      expect(wrong.text).toContain('Wrong token.')
    }
    const throttled = await signIn('yet-another-wrong-guess', '127.0.0.2')
    expect(throttled.status).toBe(429)
    expect(throttled.text).toContain('Too many attempts; wait a minute.')
    // The operator, elsewhere, is not held back by the guesses...
    const operator = await signIn(TOKEN, '127.0.0.3')
    expect(operator.status).toBe(303)
    const cookie = valueOf(sessionCookie(operator))
    const page = await clientAt('127.0.0.3')('GET', `${url}/`, { headers: { cookie } })
    expect(page.status).toBe(200)
    // ...while the guesser's address is, even with the right token, told when to come back.
    const guesser = await signIn(TOKEN, '127.0.0.2')
    expect(guesser.status).toBe(429)
    expect(guesser.text).toContain('Too many attempts; wait a minute.')
    expect(Number(guesser.headers['retry-after'])).toBeGreaterThan(0)
    expect(sessionCookie(guesser)).toBeUndefined()
  })

  it('counts every way a token is presented: bearer header, cookie and form', async () => {
    const { url, clock, signIn } = await adminGateway()
    const guesser = clientAt('127.0.0.4')
    for (let i = 0; i < 10; i++) {
      const res = await guesser('GET', `${url}/status.json`, {
        headers: { authorization: `Bearer wrong-bearer-guess-${i}` },
      })
      expect(res.status).toBe(401)
      expect(res.text).toBe(UNAUTHORIZED)
    }
    for (let i = 0; i < 5; i++) {
      const res = await guesser('GET', `${url}/readyz`, {
        headers: { cookie: `${COOKIE}=guessed-session-${i}` },
      })
      expect(res.status).toBe(401)
      expect(res.text).toBe(UNAUTHORIZED)
    }
    for (let i = 0; i < 5; i++)
      expect((await signIn(`form-guess-${i}`, '127.0.0.4')).status).toBe(401)
    // 20 failures in the minute: the next bearer from there is refused unread, the right one too.
    for (const bearer of ['one-more-wrong-guess', TOKEN]) {
      const res = await guesser('GET', `${url}/status.json`, {
        headers: { authorization: `Bearer ${bearer}` },
      })
      expect(res.status).toBe(429)
      expect(res.text).toBe(TOO_MANY)
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0)
    }
    // Elsewhere the bearer token works.
    const ok = await clientAt('127.0.0.5')('GET', `${url}/status.json`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(ok.status).toBe(200)
    // A minute after the failures, the address may try again.
    clock.now += 60_000
    const again = await guesser('GET', `${url}/status.json`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(again.status).toBe(200)
  })

  it('refuses a cross-site form post unread and uncounted, so no page can lock its viewer out', async () => {
    const { url, signIn } = await adminGateway()
    const browser = clientAt('127.0.0.6')
    for (let i = 0; i < 25; i++) {
      const res = await browser('POST', `${url}/login`, {
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: 'https://attacker.example',
        },
        body: `token=cross-site-guess-${i}`,
      })
      expect(res.status).toBe(403)
      expect(res.text).toBe('Forbidden')
    }
    const wrong = await signIn('a-wrong-guess-of-its-own', '127.0.0.6')
    expect(wrong.status).toBe(401)
    expect((await signIn(TOKEN, '127.0.0.6')).status).toBe(303)
  })
})

/**
 * Listeners of the readiness tests go on loopback addresses of their own, where no parallel test
 * (all on 127.0.0.1) takes the port between choosing it and the gateway binding it.
 */
const TAKEN_HOST = '127.0.0.77'
const READY_HOST = '127.0.0.78'

/** A port free right now on `host`. */
async function freePort(host: string): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve) => s.listen(0, host, resolve))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>((resolve) => s.close(() => resolve()))
  return port
}

/** Whether a TCP connection to `host`:`port` is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host)
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

describe('readiness: ready only once every configured listener listens', () => {
  it('never opens the data port when the admin listener cannot listen', async () => {
    const taken: Server = createServer()
    await new Promise<void>((resolve) => taken.listen(0, TAKEN_HOST, resolve))
    onTestFinished(() => new Promise<void>((resolve) => taken.close(() => resolve())))
    const adminPort = (taken.address() as AddressInfo).port
    const dataPort = await freePort(TAKEN_HOST)
    await expect(
      startTestGateway(
        {
          listen: { host: TAKEN_HOST, port: dataPort },
          admin: { host: TAKEN_HOST, port: adminPort },
          ...oneServer(NOBODY),
        },
        { autoClose: false },
      ),
    ).rejects.toThrow(/EADDRINUSE/)
    expect(await accepts(TAKEN_HOST, dataPort)).toBe(false)
  })

  it(
    'answers /readyz 200 on the data port only when the admin port takes connections',
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-ready-'))
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
      const seen: { dataReady: boolean; adminListens: boolean }[] = []
      for (let start = 0; start < 2; start++) {
        const [dataPort, adminPort] = [await freePort(READY_HOST), await freePort(READY_HOST)]
        const file = join(dir, `gateway-${start}.yaml`)
        writeFileSync(
          file,
          stringify({
            listen: { host: READY_HOST, port: dataPort },
            admin: { host: READY_HOST, port: adminPort },
            log: { level: 'silent' },
            ...oneServer(NOBODY),
          }),
        )
        // `mcp-edge serve` as an orchestrator runs it; its probe polls the data port's /readyz.
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', 'src/cli.ts', 'serve', '--config', file],
          {
            stdio: 'ignore',
          },
        )
        onTestFinished(() => void child.kill('SIGKILL'))
        const deadline = Date.now() + 20_000
        for (;;) {
          const ready = await request(`http://${READY_HOST}:${dataPort}/readyz`).then(
            (res) => res.body.dump().then(() => res.statusCode === 200),
            () => false,
          )
          if (ready) {
            seen.push({ dataReady: true, adminListens: await accepts(READY_HOST, adminPort) })
            break
          }
          if (Date.now() > deadline) throw new Error('the gateway did not become ready')
          await new Promise((resolve) => setTimeout(resolve, 2))
        }
        child.kill('SIGKILL')
      }
      expect(seen).toEqual(seen.map(() => ({ dataReady: true, adminListens: true })))
    },
  )
})
