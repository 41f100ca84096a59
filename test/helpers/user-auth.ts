import { AsyncLocalStorage } from 'node:async_hooks'
import { createHash, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import Provider, { type Interaction, type KoaContextWithOIDC } from 'oidc-provider'
import { stringify } from 'yaml'
import { nodeServing, type CacheHints } from '../../deploy/demo/serve.js'
import { parseConfigText } from '../../src/runtime/load.js'
import { startTestGateway, type TestGateway } from './gateway.js'
import { closing } from './lifecycle.js'
import { startRecording, type TestServer } from './sdk-servers.js'

/**
 * Real parts for per-user upstream authorization (docs/auth.md §Per-user credentials):
 * oidc-provider as the organisation's IdP and as a third-party service's authorization server, an
 * official-SDK server that accepts only that AS's tokens and says whose account it serves, and a
 * browser that walks the connect page over HTTP.
 */

/** Options of {@link startProvider}. */
export interface ProviderOptions {
  /** Access token lifetime in seconds (default 300). */
  readonly ttlSec?: number
  /** Resource scopes the AS grants (default issues:read issues:write mcp:tools). */
  readonly scopes?: readonly string[]
  /** `opaque`: access tokens are opaque, for RFC 7662 introspection (default jwt). */
  readonly format?: 'jwt' | 'opaque'
}

/** A running oidc-provider whose sign-ins log in whichever account the test names. */
export interface TestProvider {
  readonly issuer: string
  readonly jwksUri: string
  /** `METHOD /path` of every request, oldest first (a live array). */
  readonly requests: readonly string[]
  /** `grant_type` of every token request that succeeded (a live array). */
  readonly grants: readonly string[]
  /** Every access, refresh and ID token the token endpoint issued (a live array). */
  readonly issued: readonly string[]
  /** Sign-ins (login + consent) per account. */
  readonly signIns: Map<string, number>
  /** The user at the browser, as `account`: follows the AS's pages until it redirects away. */
  signIn(url: URL | string, account: string, jar?: CookieJar): Promise<URL>
  /** An access token for `resource` with `scope`, signed in as `account` (a public client). */
  issueToken(resource: string, scope: string, account: string): Promise<string>
  /** Registers a confidential client (RFC 7591) with these redirect URIs. */
  register(redirectUris: readonly string[]): Promise<{ clientId: string; clientSecret: string }>
  close(): Promise<void>
}

/** Cookies by origin (the test's parts share 127.0.0.1, and cookies ignore ports). */
export type CookieJar = Map<string, Map<string, string>>

export async function startProvider(options: ProviderOptions = {}): Promise<TestProvider> {
  const ttl = options.ttlSec ?? 300
  const resourceScopes = options.scopes ?? ['issues:read', 'issues:write', 'mcp:tools']
  const requests: string[] = []
  const grants: string[] = []
  const issued: string[] = []
  const signIns = new Map<string, number>()
  let account = 'alice'
  const sockets = new Set<Socket>()
  const box: { handle?: ReturnType<Provider['callback']>; provider?: Provider } = {}
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url?.split('?')[0]}`)
    if (req.url?.startsWith('/interaction/') === true) {
      interact(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500)
        res.end()
      })
      return
    }
    box.handle?.(req, res)
  })
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256' }
  const provider = new Provider(issuer, {
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    scopes: ['openid', 'offline_access', ...resourceScopes],
    findAccount: (_ctx, id) => Promise.resolve({ accountId: id, claims: () => ({ sub: id }) }),
    interactions: { url: (_ctx, i) => `/interaction/${i.uid}` },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: KoaContextWithOIDC, resource: string) => ({
          scope: resourceScopes.join(' '),
          audience: resource,
          accessTokenTTL: ttl,
          accessTokenFormat: options.format ?? 'jwt',
          ...(options.format !== 'opaque' && { jwt: { sign: { alg: 'RS256' as const } } }),
        }),
      },
    },
    pkce: { required: () => true },
    ttl: {
      AccessToken: ttl,
      RefreshToken: 86_400,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 86_400,
    },
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  })
  type Middleware = (
    ctx: { readonly path: string; readonly body: unknown },
    next: () => Promise<void>,
  ) => Promise<void>
  // oidc-provider's Koa `use` (not in its types): the token endpoint's answers, as sent.
  ;(provider as unknown as { use(fn: Middleware): void }).use(async (ctx, next) => {
    await next()
    if (ctx.path !== '/token' || typeof ctx.body !== 'object' || ctx.body === null) return
    const body = ctx.body as Record<string, unknown>
    for (const k of ['access_token', 'refresh_token', 'id_token'])
      if (typeof body[k] === 'string') issued.push(body[k])
  })
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    grants.push(String(ctx.oidc.params?.['grant_type']))
  })
  box.provider = provider
  box.handle = provider.callback()

  async function interact(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const p = box.provider as Provider
    const details: Interaction = await p.interactionDetails(req, res)
    if (details.prompt.name === 'login') {
      await p.interactionFinished(
        req,
        res,
        { login: { accountId: account } },
        {
          mergeWithLastSubmission: false,
        },
      )
      return
    }
    const grant = new p.Grant({
      accountId: details.session?.accountId ?? account,
      clientId: details.params.client_id as string,
    })
    const missing = details.prompt.details
    const oidc = missing.missingOIDCScope ?? []
    if (oidc.length > 0) grant.addOIDCScope(oidc.join(' '))
    if (missing.missingOIDCClaims !== undefined) grant.addOIDCClaims(missing.missingOIDCClaims)
    for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {}))
      grant.addResourceScope(resource, scopes.join(' '))
    const grantId = await grant.save()
    signIns.set(account, (signIns.get(account) ?? 0) + 1)
    await p.interactionFinished(
      req,
      res,
      { consent: { grantId } },
      {
        mergeWithLastSubmission: true,
      },
    )
  }

  async function signIn(url: URL | string, as: string, jar: CookieJar = new Map()): Promise<URL> {
    account = as
    let at = new URL(url)
    for (let hop = 0; hop < 12; hop++) {
      const res = await browse(at, jar)
      const location = res.headers.get('location')
      if (res.status < 300 || res.status >= 400 || location === null) {
        const body = await res.text()
        throw new Error(`sign-in stopped at ${at.href}: HTTP ${res.status} ${body.slice(0, 300)}`)
      }
      await res.text()
      at = new URL(location, at)
      if (at.origin !== issuer) return at
    }
    throw new Error('sign-in: too many redirects')
  }

  async function register(redirectUris: readonly string[]) {
    const res = await fetch(`${issuer}/reg`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: redirectUris,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      }),
    })
    const body = (await res.json()) as { client_id: string; client_secret: string }
    if (res.status !== 201) throw new Error(`registration failed: ${JSON.stringify(body)}`)
    return { clientId: body.client_id, clientSecret: body.client_secret }
  }

  async function issueToken(resource: string, scope: string, as: string): Promise<string> {
    const redirectUri = 'http://127.0.0.1/callback'
    const reg = await fetch(`${issuer}/reg`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
      }),
    })
    const { client_id: clientId } = (await reg.json()) as { client_id: string }
    const verifier = randomBytes(32).toString('base64url')
    const authorize = new URL(`${issuer}/auth`)
    const params = {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: redirectUri,
      scope,
      resource,
      state: randomUUID(),
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    }
    for (const [k, v] of Object.entries(params)) authorize.searchParams.set(k, v)
    const back = await signIn(authorize, as)
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: back.searchParams.get('code') ?? '',
        redirect_uri: redirectUri,
        code_verifier: verifier,
        client_id: clientId,
        resource,
      }),
    })
    const body = (await res.json()) as { access_token?: string }
    if (body.access_token === undefined) throw new Error(`token: ${JSON.stringify(body)}`)
    return body.access_token
  }

  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    requests,
    grants,
    issued,
    signIns,
    signIn,
    issueToken,
    register,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** A GET as a browser makes it: no redirects followed, the jar's cookies sent and updated. */
export async function browse(url: URL, jar: CookieJar): Promise<Response> {
  const cookies = jar.get(url.origin) ?? new Map<string, string>()
  const cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  const res = await fetch(url, { redirect: 'manual', headers: cookie === '' ? {} : { cookie } })
  for (const line of res.headers.getSetCookie()) {
    const [pair = ''] = line.split(';')
    const at = pair.indexOf('=')
    const name = pair.slice(0, at).trim()
    const value = pair.slice(at + 1).trim()
    if (value === '' || /max-age=0/i.test(line) || /expires=Thu, 01 Jan 1970/i.test(line))
      cookies.delete(name)
    else cookies.set(name, value)
  }
  jar.set(url.origin, cookies)
  return res
}

/** What the connect page finally showed. */
export interface ConnectOutcome {
  readonly status: number
  readonly page: string
  /** Every URL the browser was sent to, in order (to check what carries what). */
  readonly visited: readonly string[]
}

/**
 * A person opens a connect link: the gateway's page, the sign-in at the organisation's IdP as
 * `account`, the consent at the service's AS as `serviceAccount` (default the same), and the
 * gateway's callback. Returns the last page the gateway answered.
 */
export async function openConnectLink(
  link: string,
  idp: TestProvider,
  as: TestProvider,
  account: string,
  serviceAccount = account,
): Promise<ConnectOutcome> {
  const jar: CookieJar = new Map()
  const visited: string[] = []
  let at = new URL(link)
  for (let hop = 0; hop < 8; hop++) {
    visited.push(at.href)
    const res = await browse(at, jar)
    const location = res.headers.get('location')
    if (res.status !== 302 || location === null)
      return { status: res.status, page: await res.text(), visited }
    await res.text()
    const next = new URL(location, at)
    if (next.origin === idp.issuer) at = await idp.signIn(next, account, jar)
    else if (next.origin === as.issuer) at = await as.signIn(next, serviceAccount, jar)
    else at = next
  }
  throw new Error('connect: too many redirects')
}

/** The service behind the gateway: accepts only its AS's tokens, and says whose account it is. */
interface TrackerServer extends Omit<TestServer, 'notify'> {
  /** Subjects whose tokens the server refuses from now on (a revoked grant, seen late). */
  readonly refuse: Set<string>
  /** Refuses this many of the next requests with 401, whatever their token (then counts down). */
  refuseNext: number
  /** Subjects it served, in order (a live array). */
  readonly served: readonly string[]
  /** Requests it refused with 401 (no token, a bad one, or a refused subject). */
  readonly refused: number
}

/**
 * An official-SDK server (2026-07-28 and 2025-era clients) whose every request must carry a JWT
 * of `as` for its own URL (RFC 8707 audience); its `whoami` tool answers `user:<sub>`.
 */
async function startTracker(as: TestProvider, cacheHints?: CacheHints): Promise<TrackerServer> {
  const keys = createRemoteJWKSet(new URL(as.jwksUri))
  const who = new AsyncLocalStorage<string>()
  const served: string[] = []
  const refuse = new Set<string>()
  let refused = 0
  const state = { refuseNext: 0 }
  const handler = createMcpHandler(
    () => {
      const server = new McpServer(
        { name: 'tracker', version: '1.0.0' },
        cacheHints === undefined ? {} : { cacheHints },
      )
      server.registerTool('whoami', { description: 'Whose account this is' }, () => ({
        content: [{ type: 'text', text: `user:${who.getStore() ?? '?'}` }],
      }))
      server.registerTool('list_issues', { description: 'The user’s issues' }, () => ({
        content: [{ type: 'text', text: `issues of ${who.getStore() ?? '?'}` }],
      }))
      return server
    },
    { legacy: 'stateless', responseMode: 'json' },
  )
  const node = nodeServing(handler)
  let url = ''
  const http = await startRecording(async (req, res, rec) => {
    const header = rec.header('authorization') ?? ''
    const token = /^Bearer (.+)$/.exec(header)?.[1]
    let sub: string | undefined
    try {
      if (token !== undefined) {
        const { payload } = await jwtVerify(token, keys, { issuer: as.issuer, audience: url })
        sub = payload.sub
      }
    } catch {
      sub = undefined
    }
    if (sub === undefined || refuse.has(sub) || state.refuseNext > 0) {
      if (state.refuseNext > 0) state.refuseNext--
      refused++
      res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end()
      return
    }
    served.push(sub)
    await who.run(sub, () => node(req, res, rec.body))
  })
  url = http.url
  return {
    ...http,
    refuse,
    served,
    get refuseNext() {
      return state.refuseNext
    },
    set refuseNext(n: number) {
      state.refuseNext = n
    },
    get refused() {
      return refused
    },
    async close() {
      await handler.close()
      await http.close()
    },
  }
}

/** A `userTokens.key`: 32 random bytes, standard base64. */
const USER_TOKENS_KEY = randomBytes(32).toString('base64')

export interface UserAuthWorld {
  readonly gw: TestGateway
  readonly idp: TestProvider
  readonly as: TestProvider
  readonly tracker: TrackerServer
  /** The organisation's token of `account` for `server` at `gw` (default: the first gateway). */
  token(account: string, server?: string, gw?: TestGateway): Promise<string>
  /** Another gateway with the same servers and clients (`key`, `redis` as given, else the same). */
  another(over?: WorldOptions): Promise<TestGateway>
  /** Reloads `gw` (default the first) with these changes. */
  reload(over: WorldOptions, gw?: TestGateway): Promise<void>
  /** The YAML config of `gw` (default the first) with these changes, as a file would hold it. */
  configText(over?: WorldOptions, gw?: TestGateway): string
}

/** Options of {@link userAuthWorld}. */
export interface WorldOptions {
  /** More top-level config keys (servers are merged over the tracker). */
  readonly extra?: Record<string, unknown>
  /** The gateway's clock (auth and user tokens). */
  readonly now?: () => number
  /** The service AS's access token lifetime (default 300 s). */
  readonly ttlSec?: number
  readonly key?: string
  /** `userTokens.redis`. */
  readonly redis?: string
  /** `servers.tracker.userAuth` changes. */
  readonly userAuth?: Record<string, unknown>
  /** An admin listener (status page, /metrics) on a free loopback port. */
  readonly admin?: boolean
  /** The tracker's cache hints (`ttlMs`, `cacheScope`) per method. */
  readonly trackerCacheHints?: CacheHints
}

/** The IdP, the service's AS, the tracker behind it, and a gateway in front with userAuth. */
export async function userAuthWorld(first: WorldOptions = {}): Promise<UserAuthWorld> {
  const idp = await closing(startProvider())
  const as = await closing(startProvider({ ttlSec: first.ttlSec ?? 300 }))
  const tracker = await closing(startTracker(as, first.trackerCacheHints))
  let login: object = { clientId: 'pending', clientSecret: 'pending' }
  let service: object = { clientId: 'pending', clientSecret: 'pending' }
  const config = (publicUrl: string, o: WorldOptions) => {
    const extra = o.extra ?? {}
    return {
      listen: { host: '127.0.0.1', port: 0 },
      log: { level: 'info' },
      auth: { publicUrl, jwt: { issuer: idp.issuer, jwksUrl: idp.jwksUri } },
      ...(o.admin === true && { admin: { host: '127.0.0.1', port: 0 } }),
      userTokens: {
        key: o.key ?? USER_TOKENS_KEY,
        login,
        ...(o.redis !== undefined && { redis: o.redis }),
      },
      ...extra,
      servers: {
        tracker: {
          upstreams: [{ url: tracker.url }],
          userAuth: {
            issuer: as.issuer,
            scopes: ['issues:read'],
            title: 'Tracker',
            ...service,
            ...o.userAuth,
          },
        },
        ...(extra['servers'] as object | undefined),
      },
    }
  }
  const start = async (o: WorldOptions): Promise<TestGateway> => {
    const gw = await startTestGateway(config('http://127.0.0.1', o), {
      ...(o.admin !== true && { admin: false as const }),
      start: { watch: false, ...(o.now !== undefined && { auth: { now: o.now } }) },
    })
    await reload(o, gw)
    return gw
  }
  const reload = async (o: WorldOptions, gw: TestGateway): Promise<void> => {
    const text = stringify(config(gw.url, o))
    await gw.reload(parseConfigText(text, { dir: process.cwd(), env: {} }))
  }
  const gw = await startTestGateway(config('http://127.0.0.1', first), {
    ...(first.admin !== true && { admin: false as const }),
    start: { watch: false, ...(first.now !== undefined && { auth: { now: first.now } }) },
  })
  login = await idp.register([`${gw.url}/connect`])
  service = await as.register([`${gw.url}/connect/tracker/callback`])
  await reload(first, gw)
  return {
    gw,
    idp,
    as,
    tracker,
    token: (account, server = 'tracker', at = gw) =>
      idp.issueToken(at.mcpUrl(server), 'mcp:tools', account),
    another: (over = {}) => start({ ...first, ...over }),
    reload: (over, at = gw) => reload({ ...first, ...over }, at),
    configText: (over = {}, at = gw) => stringify(config(at.url, { ...first, ...over })),
  }
}
