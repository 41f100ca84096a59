import type { HttpBindings } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { Hono, type Context, type MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import { csrf } from 'hono/csrf'
import { HTTPException } from 'hono/http-exception'
import { secureHeaders } from 'hono/secure-headers'
import { streamSSE } from 'hono/streaming'
import type { CookieOptions } from 'hono/utils/cookie'
import type { AdminAuth, Presented } from '../auth.js'
import { NoReports, type StatusService } from '../service.js'
import { FAVICON_SVG, STATUS_CSS, STATUS_JS } from './assets.js'
import { errorPage, signInPage } from './forms.js'
import { renderMain, renderPage } from './page.js'
import { userTokenRows, userTokensPage, type UserTokensView } from './user-tokens.js'

/** The login cookie: a session id (sessions.ts), never the token. */
const COOKIE = 'mcp_edge_admin'
/** Event streams open at once; one more is refused (each costs a socket, not a collection). */
const MAX_STREAMS = 16
/** A sign-in form is a token and little else. */
const MAX_FORM_BYTES = 4096
/** The page's reconnection delay for its event stream (WHATWG HTML §9.2.4 `retry`). */
const RETRY_MS = 2000

const JSON_TYPE = 'application/json'
const TEXT_TYPE = 'text/plain; charset=utf-8'
const UNAUTHORIZED = '{"error":"unauthorized"}\n'
const TOO_MANY = '{"error":"too many failed sign-ins; wait a minute"}\n'
const TOO_MANY_PAGE = 'Too many attempts; wait a minute.'

/** The Prometheus registry (or a primary's aggregate of its workers'). */
export interface MetricsText {
  metrics(): Promise<string>
  readonly contentType: string
}

export interface AdminAppOptions {
  readonly service: StatusService
  readonly auth: AdminAuth
  /** True when the admin listener is bound to a loopback address (see hostAllowed). */
  readonly loopback: boolean
  readonly metrics: MetricsText
  /** Users connected to `userAuth` servers (`/user-tokens`); absent: no such route. */
  readonly userTokens?: UserTokensView | undefined
}

type AdminEnv = { Bindings: HttpBindings }
type AdminContext = Context<AdminEnv>

/**
 * The admin listener's routes (docs/operations.md §Status page): `/metrics`, `/readyz` (admin),
 * `/` (the page), `/status.json`, `/status/events`, the page's three files, `/login` and
 * `/logout`. The rules every route shares are middleware on the whole app, so no route can be
 * added without them: the security headers, `Cache-Control: no-store`, and the Host rule.
 */
export function adminApp(opts: AdminAppOptions): Hono<AdminEnv> {
  const app = new Hono<AdminEnv>()
  // SECURITY: on every answer (docs/operations.md §Status page): no inline script or style and
  // nothing from elsewhere, never framed (clickjacking), no MIME sniffing, no referrer.
  app.use(
    secureHeaders({
      contentSecurityPolicy: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'"],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
      xFrameOptions: 'DENY',
      referrerPolicy: 'no-referrer',
      // The listener speaks plain http; HSTS over http is ignored anyway (RFC 6797 §8.1).
      strictTransportSecurity: false,
    }),
  )
  app.use(async function noStore(c, next) {
    await next()
    // SECURITY: never cached: the figures include caller hashes and rule names.
    c.header('cache-control', 'no-store')
  })
  app.use(async function hostRule(c, next) {
    // SECURITY: DNS rebinding: a page on a name that resolves to 127.0.0.1 would be same-origin
    // with a loopback listener, so only loopback names reach any route, /metrics included
    // (RFC 9110 §15.5.20: 421, this listener does not serve that authority). Both the Host
    // header and an absolute-form target's authority are judged (RFC 9112 §3.2.2).
    if (opts.loopback && !(hostAllowed(c.req.header('host')) && hostAllowed(authority(c)))) {
      return c.body('misdirected request\n', 421, { 'content-type': TEXT_TYPE })
    }
    await next()
  })

  app.get('/metrics', async (c) => {
    try {
      const text = await opts.metrics.metrics()
      return c.body(text, 200, { 'content-type': opts.metrics.contentType })
    } catch {
      return c.body('metrics unavailable\n', 500, { 'content-type': TEXT_TYPE })
    }
  })
  app.get('/status.css', (c) =>
    c.body(STATUS_CSS, 200, { 'content-type': 'text/css; charset=utf-8' }),
  )
  app.get('/status.js', (c) =>
    c.body(STATUS_JS, 200, { 'content-type': 'text/javascript; charset=utf-8' }),
  )
  app.get('/favicon.svg', (c) => c.body(FAVICON_SVG, 200, { 'content-type': 'image/svg+xml' }))

  // SECURITY: a form post from another site is refused before it is read or counted, so no page
  // can spend its viewer's sign-in budget (throttle.ts) or sign them out.
  const sameOrigin = csrf()
  app.post(
    '/login',
    sameOrigin,
    async function knownLength(c, next) {
      // A browser sends a form with its length (RFC 9110 §8.6): one without is refused unread
      // (RFC 9110 §15.5.12), so bodyLimit judges the declared length and Node holds the body to it.
      if (
        c.req.header('transfer-encoding') !== undefined ||
        c.req.header('content-length') === undefined
      )
        return c.body('length required\n', 411, { 'content-type': TEXT_TYPE })
      await next()
    },
    bodyLimit({
      maxSize: MAX_FORM_BYTES,
      onError: (c) => c.body('sign-in form too large\n', 413, { 'content-type': TEXT_TYPE }),
    }),
    async (c) => {
      let token: string
      try {
        const form = await c.req.parseBody()
        token = typeof form['token'] === 'string' ? form['token'] : ''
      } catch {
        return c.body('unreadable sign-in form\n', 400, { 'content-type': TEXT_TYPE })
      }
      const result = opts.auth.signIn(peer(c), token)
      if (result.ok) {
        setCookie(c, COOKIE, result.session, { ...cookieFlags(c), maxAge: result.seconds })
        return c.redirect('./', 303)
      }
      if (result.why === 'throttled') {
        c.header('retry-after', String(result.retryAfter))
        return c.html(signInPage(TOO_MANY_PAGE), 429)
      }
      const message = result.why === 'no-token' ? 'No token is configured.' : 'Wrong token.'
      return c.html(signInPage(message), 401)
    },
  )
  app.post('/logout', sameOrigin, (c) => {
    opts.auth.signOut(getCookie(c, COOKIE))
    deleteCookie(c, COOKIE, cookieFlags(c))
    return c.redirect('./', 303)
  })

  const guarded = guard(opts.auth)
  app.get('/', guarded, async (c) => {
    try {
      return c.html(renderPage(await opts.service.document(), { signOut: opts.auth.required }))
    } catch (err) {
      return c.html(errorPage(unavailable(err)), 503)
    }
  })
  app.get('/status.json', guarded, async (c) => {
    try {
      return json(c, 200, await opts.service.document())
    } catch (err) {
      return json(c, 503, { error: unavailable(err) })
    }
  })
  app.get('/readyz', guarded, async (c) => {
    try {
      const r = await opts.service.readiness()
      return json(c, r.ready ? 200 : 503, r)
    } catch (err) {
      return json(c, 503, { error: unavailable(err) })
    }
  })
  const users = opts.userTokens
  if (users !== undefined) {
    // Who is connected where (docs/auth.md §Per-user credentials), never a token.
    app.get('/user-tokens', guarded, async (c) =>
      c.html(userTokensPage(await users.list(), users.showSubjects)),
    )
    app.get('/user-tokens.json', guarded, async (c) =>
      json(c, 200, userTokenRows(await users.list(), users.showSubjects)),
    )
  }
  let streams = 0
  app.get('/status/events', guarded, (c) => {
    if (streams >= MAX_STREAMS) {
      return c.body('too many status streams\n', 503, { 'content-type': TEXT_TYPE })
    }
    streams++
    return streamSSE(c, async (stream) => {
      const ended = new Promise<void>((resolve) => stream.onAbort(resolve))
      // A client that reads slower than the ticks gets the next figures, not a growing queue.
      let writing = false
      const push = (main: string): void => {
        if (writing || stream.aborted || stream.closed) return
        writing = true
        void stream.writeSSE({ event: 'status', data: main }).finally(() => (writing = false))
      }
      const unsubscribe = opts.service.subscribe((doc) => push(renderMain(doc)))
      try {
        await stream.write(`retry: ${RETRY_MS}\n\n`)
        opts.service.document().then(
          (doc) => push(renderMain(doc)),
          () => undefined,
        )
        await ended
      } finally {
        unsubscribe()
        streams--
      }
    })
  })

  for (const [path, allow] of [
    ['/', 'GET, HEAD'],
    ['/status.json', 'GET, HEAD'],
    ['/status/events', 'GET, HEAD'],
    ['/readyz', 'GET, HEAD'],
    ['/metrics', 'GET, HEAD'],
    ['/status.css', 'GET, HEAD'],
    ['/status.js', 'GET, HEAD'],
    ['/favicon.svg', 'GET, HEAD'],
    ['/login', 'POST'],
    ['/logout', 'POST'],
  ] as const) {
    app.all(path, (c) => c.body('method not allowed\n', 405, { allow, 'content-type': TEXT_TYPE }))
  }
  app.notFound((c) => c.body('not found\n', 404, { 'content-type': TEXT_TYPE }))
  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse()
    return c.body('internal error\n', 500, { 'content-type': TEXT_TYPE })
  })
  return app
}

/**
 * Lets a request on when `admin.token` is not set or its credential is good; otherwise a browser
 * asking for the page gets the sign-in form, anything else a JSON 401 with the challenge to use
 * (RFC 6750 §3), and a source past its budget a 429 with Retry-After (RFC 9110 §10.2.3).
 */
function guard(auth: AdminAuth): MiddlewareHandler<AdminEnv> {
  return async function signedIn(c, next) {
    const presented = presentedBy(c)
    const verdict = auth.check(peer(c), presented)
    if (verdict.ok) return next()
    const page = c.req.path === '/'
    if (verdict.why === 'throttled') {
      c.header('retry-after', String(verdict.retryAfter))
      return page ? c.html(signInPage(TOO_MANY_PAGE), 429) : c.body(TOO_MANY, 429, jsonType())
    }
    const invalid = verdict.why === 'wrong' && presented.bearer !== undefined
    c.header(
      'www-authenticate',
      `Bearer realm="mcp-edge admin"${invalid ? ', error="invalid_token"' : ''}`,
    )
    // A session that ended: the browser forgets the cookie rather than send it again.
    if (presented.session !== undefined) deleteCookie(c, COOKIE, cookieFlags(c))
    return page ? c.html(signInPage(''), 401) : c.body(UNAUTHORIZED, 401, jsonType())
  }
}

/** The credentials a request presents: `Authorization: Bearer` (RFC 6750 §2.1), the cookie. */
function presentedBy(c: AdminContext): Presented {
  const header = c.req.header('authorization')
  // The scheme is case-insensitive (RFC 9110 §11.1); anything but Bearer is no credential here.
  const bearer =
    header !== undefined && /^bearer /i.test(header) ? header.slice(7).trim() : undefined
  return { bearer, session: getCookie(c, COOKIE) }
}

/**
 * SECURITY: the login cookie's flags (RFC 6265 §4.1.2): HttpOnly (no script reads it),
 * SameSite=Strict (no other site's request carries it), Path=/, and Secure when the request came
 * over TLS (a browser never sends a Secure cookie over plain http, RFC 6265 §5.4).
 */
function cookieFlags(c: AdminContext): CookieOptions {
  const secure = new URL(c.req.url).protocol === 'https:'
  return { path: '/', httpOnly: true, sameSite: 'Strict', secure }
}

/** The TCP peer: the only source address a client cannot choose per request. */
function peer(c: AdminContext): string | undefined {
  return getConnInfo(c).remote.address
}

/** The authority the request is routed by: the target's, else Host's (RFC 9112 §3.3). */
function authority(c: AdminContext): string {
  return new URL(c.req.url).host
}

/**
 * A Host naming a loopback address (`localhost`, 127.0.0.0/8, `[::1]`), any port: what a browser
 * sends for a loopback listener, and never what it sends for a rebound public name.
 */
export function hostAllowed(host: string | undefined): boolean {
  if (host === undefined) return false
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]
  return name === 'localhost' || name === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(name ?? '')
}

function json(c: AdminContext, status: 200 | 503, value: unknown): Response {
  return c.body(`${JSON.stringify(value)}\n`, status, jsonType())
}

function jsonType(): Record<string, string> {
  return { 'content-type': JSON_TYPE }
}

function unavailable(err: unknown): string {
  return err instanceof NoReports ? err.message : 'status unavailable'
}
