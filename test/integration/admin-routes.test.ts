import { Agent, request } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { adminUrl, oneServer, startTestGateway } from '../helpers/gateway.js'
import { sendRaw } from '../helpers/raw-socket.js'

/**
 * The admin listener's routes on hono (src/status/web/app.ts), over real sockets to the real
 * gateway: what each path answers, to which methods, with which headers, and the bounds on the
 * sign-in form and the event streams (docs/operations.md §Status page).
 */

const TOKEN = 'admin-token-of-the-routes-test'
const AUTH = { authorization: `Bearer ${TOKEN}` }

async function gateway(): Promise<string> {
  const gw = await startTestGateway({
    admin: { host: '127.0.0.1', port: 0, token: TOKEN },
    ...oneServer('http://127.0.0.1:9/mcp'),
  })
  return adminUrl(gw)
}

async function get(
  url: string,
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' = 'GET',
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const res = await request(url, { method, headers })
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
}

/** What every answer of the admin listener carries. */
function expectSecurityHeaders(headers: Record<string, unknown>): void {
  expect(headers['content-security-policy']).toBe(
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
      "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  )
  expect(headers['x-content-type-options']).toBe('nosniff')
  expect(headers['x-frame-options']).toBe('DENY')
  expect(headers['referrer-policy']).toBe('no-referrer')
  expect(headers['cache-control']).toBe('no-store')
}

describe('admin listener routes', () => {
  it('answers each path to its methods only, every answer with the security headers', async () => {
    const url = await gateway()
    const cases: [string, 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE', number, string][] = [
      ['/metrics', 'GET', 200, 'text/plain; version=0.0.4; charset=utf-8'],
      ['/status.json', 'GET', 200, 'application/json'],
      ['/readyz', 'GET', 200, 'application/json'],
      ['/', 'GET', 200, 'text/html; charset=UTF-8'],
      ['/status.css', 'GET', 200, 'text/css; charset=utf-8'],
      ['/status.js', 'GET', 200, 'text/javascript; charset=utf-8'],
      ['/favicon.svg', 'GET', 200, 'image/svg+xml'],
      ['/no-such-page', 'GET', 404, 'text/plain; charset=utf-8'],
    ]
    for (const [path, method, status, type] of cases) {
      const res = await get(`${url}${path}`, method, AUTH)
      expect({ path, status: res.status, type: res.headers['content-type'] }).toEqual({
        path,
        status,
        type,
      })
      expectSecurityHeaders(res.headers)
    }
    const missing = await get(`${url}/no-such-page`)
    expect(missing.text).toBe('not found\n')
    // HEAD is GET without the body.
    const head = await get(`${url}/status.css`, 'HEAD')
    expect(head.status).toBe(200)
    expect(head.text).toBe('')
    for (const [path, method, allow] of [
      ['/', 'POST', 'GET, HEAD'],
      ['/status.json', 'DELETE', 'GET, HEAD'],
      ['/metrics', 'POST', 'GET, HEAD'],
      ['/login', 'GET', 'POST'],
      ['/logout', 'GET', 'POST'],
    ] as const) {
      const res = await get(`${url}${path}`, method, AUTH)
      expect({ path, status: res.status, allow: res.headers['allow'], text: res.text }).toEqual({
        path,
        status: 405,
        allow,
        text: 'method not allowed\n',
      })
      expectSecurityHeaders(res.headers)
    }
    // Without a credential: the page offers the form, a script gets the challenge.
    const page = await get(`${url}/`)
    expect(page.status).toBe(401)
    expect(page.text).toContain('<form method="post" action="login">')
    expect(page.headers['www-authenticate']).toBe('Bearer realm="mcp-edge admin"')
    expectSecurityHeaders(page.headers)
    const wrong = await get(`${url}/readyz`, 'GET', { authorization: 'Bearer not-the-token' })
    expect(wrong.status).toBe(401)
    expect(wrong.text).toBe('{"error":"unauthorized"}\n')
    expect(wrong.headers['www-authenticate']).toBe(
      'Bearer realm="mcp-edge admin", error="invalid_token"',
    )
  })

  it('bounds the sign-in form: its length declared, at most 4 KiB', async () => {
    const url = await gateway()
    const port = Number(new URL(url).port)
    const head = (extra: string): string =>
      `POST /login HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${url}\r\n` +
      `Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n${extra}\r\n`
    const form = `token=${TOKEN}`
    const chunked = await sendRaw(port, [
      head('Transfer-Encoding: chunked\r\n'),
      `${form.length.toString(16)}\r\n${form}\r\n0\r\n\r\n`,
    ])
    expect(chunked.status).toBe(411)
    expect(chunked.body).toBe('length required\n')
    const big = `token=${'x'.repeat(5000)}`
    const large = await sendRaw(port, [head(`Content-Length: ${big.length}\r\n`), big])
    expect(large.status).toBe(413)
    expect(large.body).toBe('sign-in form too large\n')
    const ok = await sendRaw(port, [head(`Content-Length: ${form.length}\r\n`), form])
    expect(ok.status).toBe(303)
    expect(ok.headers['set-cookie']).toMatch(/^mcp_edge_admin=/)
  })

  it('refuses a request that does not arrive within 5 s', async () => {
    const url = await gateway()
    const port = Number(new URL(url).port)
    const started = Date.now()
    const slow = await sendRaw(
      port,
      [`GET /readyz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`, 'X-Slow: 1\r\n'],
      { delayMs: 100, timeoutMs: 8000 },
    )
    expect(slow.status).toBe(408)
    expect(Date.now() - started).toBeLessThan(7000)
  })

  it('streams the live page to at most 16 clients at once, and frees a slot when one leaves', async () => {
    const url = await gateway()
    const agent = new Agent({ connections: 32 })
    onTestFinished(() => agent.destroy())
    const open = async (): Promise<{ status: number; first: string; close(): void }> => {
      const abort = new AbortController()
      const res = await request(`${url}/status/events`, {
        headers: AUTH,
        dispatcher: agent,
        signal: abort.signal,
      })
      if (res.statusCode !== 200) {
        return { status: res.statusCode, first: await res.body.text(), close: () => undefined }
      }
      expect(res.headers['content-type']).toBe('text/event-stream')
      expectSecurityHeaders(res.headers)
      // Read on (the stream stays open) until the first status event has arrived.
      const first = await new Promise<string>((resolve) => {
        let text = ''
        res.body.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8')
          if (text.includes('event: status')) resolve(text)
        })
        res.body.on('error', () => resolve(text))
      })
      return { status: 200, first, close: () => abort.abort() }
    }
    const streams = await Promise.all(Array.from({ length: 16 }, open))
    for (const s of streams) {
      expect(s.status).toBe(200)
      expect(s.first).toMatch(/^retry: 2000\n\nevent: status\ndata: <main id="status"/)
    }
    const refused = await open()
    expect(refused).toMatchObject({ status: 503, first: 'too many status streams\n' })
    streams[0]?.close()
    await expect.poll(async () => (await open()).status, { timeout: 3000 }).toBe(200)
  })
})
