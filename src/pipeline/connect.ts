import type { Context, Hono } from 'hono'
import { getCookie } from 'hono/cookie'
import { html } from 'hono/html'
import type { GatewayEnv } from './env.js'
import {
  CONNECT_COOKIE,
  type ConnectFlow,
  type ConnectResult,
  type RedirectQuery,
} from '../userauth/connect.js'

/**
 * The connect page's routes (docs/auth.md §The connect page; the flow is userauth/connect.ts):
 * `GET {publicUrl}/connect/{server}?state=…` starts it, `GET {publicUrl}/connect` is where the
 * gateway's own issuer sends the browser back after the sign-in, and
 * `GET {publicUrl}/connect/{server}/callback` where the service's AS does. Served with and without
 * the public path prefix, as the protected resource metadata is (pipeline/well-known.ts).
 */
export function mountConnect(app: Hono<GatewayEnv>, flow: ConnectFlow, prefix: string): void {
  const cookiePath = `${prefix}/connect`
  for (const base of prefix === '' ? [''] : ['', prefix]) {
    app.get(`${base}/connect`, async (c) =>
      respond(c, await flow.signedIn(query(c), getCookie(c, CONNECT_COOKIE)), cookiePath),
    )
    app.get(`${base}/connect/:server`, async (c) =>
      respond(c, await flow.start(c.req.param('server'), c.req.query('state')), cookiePath),
    )
    app.get(`${base}/connect/:server/callback`, async (c) => {
      const cookie = getCookie(c, CONNECT_COOKIE)
      return respond(c, await flow.callback(c.req.param('server'), query(c), cookie), cookiePath)
    })
  }
}

function query(c: Context<GatewayEnv>): RedirectQuery {
  return {
    code: c.req.query('code'),
    state: c.req.query('state'),
    iss: c.req.query('iss'),
    error: c.req.query('error'),
  }
}

/**
 * SECURITY: nothing secret on a page or in a header: the pages are fixed text (plus the server's
 * configured title, escaped); no referrer leaves them (the link's state and the codes are in the
 * URL); no caching, no framing, no script.
 */
const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
} as const

function respond(
  c: Context<GatewayEnv>,
  result: ConnectResult,
  path: string,
): Response | Promise<Response> {
  const secure = new URL(c.req.url).protocol === 'https:' ? '; Secure' : ''
  // SECURITY: HttpOnly and SameSite=Lax: readable by no script, sent on the top-level redirects
  // back from the authorization servers, and on no request another site makes in the background.
  const cookie = (value: string, maxAge: number): string =>
    `${CONNECT_COOKIE}=${value}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`
  if (result.kind === 'redirect') {
    const headers: Record<string, string> = { ...PAGE_HEADERS, location: result.location }
    if (result.cookie !== undefined) headers['set-cookie'] = cookie(result.cookie, 600)
    return c.body(null, 302, headers)
  }
  const headers: Record<string, string> = {
    ...PAGE_HEADERS,
    'content-type': 'text/html; charset=utf-8',
  }
  if (result.done) headers['set-cookie'] = cookie('', 0)
  const body = html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>${result.title}</title>
      </head>
      <body style="font-family: sans-serif; max-width: 40em; margin: 4em auto">
        <h1>${result.title}</h1>
        <p>${result.text}</p>
      </body>
    </html>`
  return c.html(body, result.status as 200, headers)
}
