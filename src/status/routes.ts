import type { IncomingMessage, ServerResponse } from 'node:http'
import { FAVICON_SVG, STATUS_CSS, STATUS_JS } from './assets.js'
import type { AdminAuth } from './auth.js'
import { html } from './html.js'
import { renderMain, renderPage } from './page.js'
import { NoReports, type StatusService } from './service.js'

/** Event streams open at once; one more is refused (each costs a socket, not a collection). */
const MAX_STREAMS = 16
/** A login form is a token and little else. */
const MAX_LOGIN_BYTES = 4096
const LOGIN_TIMEOUT_MS = 5000

/**
 * SECURITY: what every status answer carries (docs/operations.md §Status page): no inline script
 * or style and nothing from elsewhere (`default-src 'self'`), never framed (clickjacking), no
 * MIME sniffing, no referrer, never cached (the figures include caller hashes and rule names).
 */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

export interface StatusRoutes {
  readonly service: StatusService
  readonly auth: AdminAuth
  /** True when the admin listener is bound to a loopback address (see hostAllowed). */
  readonly loopback: boolean
}

/**
 * The admin listener's status routes: `/` (the page), `/status.json`, `/status/events`, the page's
 * two files, `/readyz` (admin) and `/login`. Returns false for any other path (the listener
 * answers `/metrics` itself, and 404 for the rest).
 */
export function statusRoutes(
  opts: StatusRoutes,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  let streams = 0
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    const known = [
      '/',
      '/favicon.svg',
      '/status.json',
      '/status/events',
      '/status.css',
      '/status.js',
      '/readyz',
      '/login',
    ]
    if (path === undefined || !known.includes(path)) return false
    // SECURITY: DNS rebinding: a page on a name that resolves to 127.0.0.1 would be same-origin
    // with a loopback admin listener; only loopback names reach it.
    if (opts.loopback && !hostAllowed(req.headers.host)) {
      send(res, 421, 'text/plain; charset=utf-8', 'misdirected request\n')
      return true
    }
    if (path === '/status.css') return sendAsset(req, res, 'text/css; charset=utf-8', STATUS_CSS)
    if (path === '/favicon.svg') return sendAsset(req, res, 'image/svg+xml', FAVICON_SVG)
    if (path === '/status.js')
      return sendAsset(req, res, 'text/javascript; charset=utf-8', STATUS_JS)
    if (path === '/login') {
      if (req.method !== 'POST') return notAllowed(res, 'POST')
      void login(req, res, opts.auth)
      return true
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return notAllowed(res, 'GET, HEAD')
    if (!opts.auth.allows(req.headers)) {
      // A browser gets the form; a script gets the same 401 and the challenge to use.
      res.setHeader('www-authenticate', 'Bearer realm="mcp-edge admin"')
      if (path === '/') send(res, 401, 'text/html; charset=utf-8', loginPage(''))
      else send(res, 401, 'application/json', '{"error":"unauthorized"}\n')
      return true
    }
    if (path === '/status/events') {
      if (streams >= MAX_STREAMS) {
        send(res, 503, 'text/plain; charset=utf-8', 'too many status streams\n')
        return true
      }
      streams++
      res.once('close', () => streams--)
      stream(res, opts.service)
      return true
    }
    void answer(path, res, opts.service)
    return true
  }
}

async function answer(path: string, res: ServerResponse, service: StatusService): Promise<void> {
  try {
    if (path === '/readyz') {
      const r = await service.readiness()
      send(res, r.ready ? 200 : 503, 'application/json', `${JSON.stringify(r)}\n`)
    } else if (path === '/status.json') {
      send(res, 200, 'application/json', `${JSON.stringify(await service.document())}\n`)
    } else {
      send(res, 200, 'text/html; charset=utf-8', renderPage(await service.document()).text)
    }
  } catch (err) {
    const why = err instanceof NoReports ? err.message : 'status unavailable'
    if (path === '/') send(res, 503, 'text/html; charset=utf-8', errorPage(why))
    else send(res, 503, 'application/json', `${JSON.stringify({ error: why })}\n`)
  }
}

/** Server-sent events (WHATWG HTML §9.2): one `status` event with the page's `<main>` per tick. */
function stream(res: ServerResponse, service: StatusService): void {
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    'content-type': 'text/event-stream; charset=utf-8',
    connection: 'keep-alive',
  })
  res.write('retry: 2000\n\n')
  const push = (main: string): void => {
    if (res.destroyed || res.writableEnded) return
    // Every line of the data is its own `data:` field; the client joins them with newlines.
    res.write(`event: status\ndata: ${main.split(/\r\n|\r|\n/).join('\ndata: ')}\n\n`)
  }
  const unsubscribe = service.subscribe((doc) => push(renderMain(doc).text))
  res.once('close', unsubscribe)
  service.document().then(
    (doc) => push(renderMain(doc).text),
    () => undefined,
  )
}

async function login(req: IncomingMessage, res: ServerResponse, auth: AdminAuth): Promise<void> {
  const body = await readBody(req)
  if (body === undefined) {
    send(res, 413, 'text/plain; charset=utf-8', 'login form too large or too slow\n')
    return
  }
  const token = new URLSearchParams(body).get('token') ?? ''
  const result = auth.login(token)
  if ('cookie' in result) {
    res.writeHead(303, { ...SECURITY_HEADERS, location: './', 'set-cookie': result.cookie })
    res.end()
    return
  }
  if (result.throttled)
    send(res, 429, 'text/html; charset=utf-8', loginPage('Too many attempts; wait a minute.'))
  else
    send(
      res,
      401,
      'text/html; charset=utf-8',
      loginPage(auth.required ? 'Wrong token.' : 'No token is configured.'),
    )
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    const timer = setTimeout(() => done(undefined), LOGIN_TIMEOUT_MS)
    const done = (v: string | undefined): void => {
      clearTimeout(timer)
      if (v === undefined) req.destroy()
      resolve(v)
    }
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size > MAX_LOGIN_BYTES) done(undefined)
      else chunks.push(c)
    })
    req.on('end', () => done(Buffer.concat(chunks).toString('utf8')))
    req.on('error', () => done(undefined))
  })
}

/**
 * A Host header naming a loopback address (`localhost`, 127.0.0.0/8, `[::1]`), any port: what a
 * browser sends for a loopback listener, and never what it sends for a rebound public name.
 */
export function hostAllowed(host: string | undefined): boolean {
  if (host === undefined) return false
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]
  return name === 'localhost' || name === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(name ?? '')
}

function sendAsset(req: IncomingMessage, res: ServerResponse, type: string, body: string): true {
  if (req.method !== 'GET' && req.method !== 'HEAD') return notAllowed(res, 'GET, HEAD')
  send(res, 200, type, body)
  return true
}

function notAllowed(res: ServerResponse, allow: string): true {
  res.setHeader('allow', allow)
  send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n')
  return true
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type })
  res.end(res.req.method === 'HEAD' ? undefined : body)
}

function loginPage(message: string): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>mcp-edge status: sign in</title>
        <link rel="icon" href="favicon.svg" type="image/svg+xml" />
        <link rel="stylesheet" href="status.css" />
      </head>
      <body>
        <main class="login">
          <section>
            <h2>mcp-edge status</h2>
            <p>This admin listener needs its token (<code>admin.token</code>).</p>
            ${message === '' ? '' : html`<p class="bad">${message}</p>`}
            <form method="post" action="login">
              <label
                >Token <input type="password" name="token" autocomplete="current-password" required
              /></label>
              <button type="submit">Sign in</button>
            </form>
          </section>
        </main>
      </body>
    </html> `.text
}

function errorPage(why: string): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>mcp-edge status</title>
        <link rel="icon" href="favicon.svg" type="image/svg+xml" />
        <link rel="stylesheet" href="status.css" />
      </head>
      <body>
        <main>
          <section>
            <h2>Status unavailable</h2>
            <p>${why}; try again in a moment.</p>
          </section>
        </main>
      </body>
    </html> `.text
}
