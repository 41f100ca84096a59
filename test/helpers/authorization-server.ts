import { createHash, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import Provider, { type Interaction, type KoaContextWithOIDC } from 'oidc-provider'
import { Agent, fetch as undiciFetch } from 'undici'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { startTestGateway, type TestGateway } from './gateway.js'
import type { TestServer } from './sdk-servers.js'

/** The scopes the test resource servers define (what a gateway's servers may require). */
const RESOURCE_SCOPES = ['mcp:tools', 'docs:read', 'docs:write'] as const

/** Options of {@link startAuthorizationServer}. */
export interface AuthorizationServerOptions {
  /** Lifetime of every access token, in seconds (default 60). */
  readonly accessTokenTtlSec?: number
  /** The account every sign-in logs in as (default 'alice'). */
  readonly accountId?: string
  /**
   * Accept client ID metadata documents (an https URL as `client_id`), fetched trusting this CA
   * (PEM): the documents are https-only, and a test serves them with its own certificate.
   */
  readonly clientMetadataCa?: string
}

/** A real OAuth 2.1 authorization server (oidc-provider 9) on 127.0.0.1:0. */
export interface TestAuthorizationServer {
  /** `http://127.0.0.1:<port>`, the `iss` of every token. */
  readonly issuer: string
  /** Where the public signing keys are published (its `jwks_uri`). */
  readonly jwksUri: string
  /** The `kid` tokens are signed with now. */
  readonly kid: string
  /** `METHOD /path` of every request that reached the AS, oldest first (a live array). */
  readonly requests: readonly string[]
  /** The `grant_type` of every successful token request, oldest first (a live array). */
  readonly grants: readonly string[]
  /** How many sign-ins (login + consent) the user went through. */
  readonly signIns: number
  /** Scopes the user unticks on the consent page (a live set; empty: the user grants all). */
  readonly declined: Set<string>
  /** Errors oidc-provider reported (server errors and refused grants, registrations, requests). */
  readonly errors: readonly Error[]
  /**
   * The user at the browser: opens `authorizationUrl`, follows the AS's redirects with a cookie
   * jar, logs in and consents through the interaction pages, and returns the URL the AS finally
   * redirects to (the client's redirect URI with `code`, `state` and `iss`). Nothing is fetched
   * there: delivering the callback is the caller's job.
   */
  signIn(authorizationUrl: URL | string): Promise<URL>
  /**
   * Key rotation: a new signing key replaces the current one, which is withdrawn from the JWKS at
   * once. Tokens issued from now on carry the new `kid`.
   */
  rotateSigningKey(): Promise<void>
  /**
   * A client of the test's own (registered, public, PKCE) signs in and returns the access token
   * the AS issued for `resource` (RFC 8707) with `scope`.
   */
  issueToken(resource: string, scope: string): Promise<string>
  close(): Promise<void>
}

/**
 * Starts oidc-provider with what MCP clients rely on: open dynamic client registration
 * (RFC 7591), the authorization code grant with PKCE (S256, required for public clients), refresh
 * tokens, and resource indicators (RFC 8707) whose access tokens are JWTs (RFC 9068) with `aud` =
 * the requested resource and the scopes of {@link RESOURCE_SCOPES}.
 *
 * Login and consent are automatic: the interaction pages are served by this helper (no
 * devInteractions), which logs in `accountId` and grants whatever the client asked for.
 *
 * Key rotation: oidc-provider takes its keys at construction, so a rotation builds a new Provider
 * with the new key and swaps it in behind the same listener (same issuer, same port, no rebind).
 * Both share this server's storage ({@link storeFor}), so registered clients, grants and refresh
 * tokens survive the swap, as a real AS's database survives a key rotation.
 */
export async function startAuthorizationServer(
  options: AuthorizationServerOptions = {},
): Promise<TestAuthorizationServer> {
  const ttl = options.accessTokenTtlSec ?? 60
  const accountId = options.accountId ?? 'alice'
  const cookieKeys = [randomBytes(32).toString('base64url')]
  const grants: string[] = []
  const requests: string[] = []
  const errors: Error[] = []
  let signIns = 0
  const declined = new Set<string>()
  const adapter = storeFor(new Map())
  const metadataFetch = fetcherTrusting(options.clientMetadataCa)
  let current: { provider: Provider; handle: ReturnType<Provider['callback']>; kid: string }

  const sockets = new Set<Socket>()
  const server = createServer((req, res) => {
    const { provider, handle } = current
    requests.push(`${req.method} ${req.url?.split('?')[0]}`)
    if (req.url?.startsWith('/interaction/') === true) {
      interact(provider, req, res).catch((err: unknown) => {
        errors.push(err instanceof Error ? err : new Error(String(err)))
        if (!res.headersSent) res.writeHead(500)
        res.end()
      })
      return
    }
    handle(req, res)
  })
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const build = (): typeof current => {
    const { jwk, kid } = signingKey()
    const provider = new Provider(issuer, {
      adapter,
      jwks: { keys: [jwk] },
      cookies: { keys: cookieKeys },
      // Listed (so clients may register with them, RFC 7591 `scope`) and granted per resource.
      scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
      findAccount: (_ctx, id) => Promise.resolve({ accountId: id, claims: () => ({ sub: id }) }),
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      features: {
        devInteractions: { enabled: false },
        registration: { enabled: true },
        clientIdMetadataDocument: { enabled: metadataFetch !== undefined, ack: 'draft-02' },
        resourceIndicators: {
          enabled: true,
          // A refresh without `resource` stays on the resource the grant was for.
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: KoaContextWithOIDC, resource: string) => ({
            scope: RESOURCE_SCOPES.join(' '),
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          }),
        },
      },
      ttl: {
        AccessToken: ttl,
        RefreshToken: 86_400,
        AuthorizationCode: 60,
        Interaction: 600,
        Session: 3600,
        Grant: 86_400,
      },
      ...(metadataFetch !== undefined && { fetch: metadataFetch }),
      // Every client allowed the refresh_token grant gets one, whether or not it asked for
      // offline_access (the default policy requires it).
      issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    })
    provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
      grants.push(String(ctx.oidc.params?.['grant_type']))
    })
    for (const event of [
      'server_error',
      'grant.error',
      'authorization.error',
      'registration_create.error',
    ]) {
      provider.on(event, (_ctx: unknown, err: Error) => errors.push(err))
    }
    return { provider, handle: provider.callback(), kid }
  }
  current = build()

  /** Login, then consent to everything asked but the `declined` scopes. */
  async function interact(provider: Provider, req: IncomingMessage, res: ServerResponse) {
    const details: Interaction = await provider.interactionDetails(req, res)
    if (details.prompt.name === 'login') {
      const result = { login: { accountId } }
      return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false })
    }
    if (details.prompt.name !== 'consent') {
      throw new Error(`unexpected prompt ${details.prompt.name}`)
    }
    const found =
      details.grantId === undefined ? undefined : await provider.Grant.find(details.grantId)
    const grant =
      found ??
      new provider.Grant({
        accountId: details.session?.accountId ?? accountId,
        clientId: details.params.client_id,
      })
    const missing = details.prompt.details
    // A declined scope is rejected, not left open: oidc-provider would ask again otherwise.
    const ticked = (scopes: readonly string[]) => scopes.filter((x) => !declined.has(x)).join(' ')
    const unticked = (scopes: readonly string[]) => scopes.filter((x) => declined.has(x)).join(' ')
    const oidc = missing.missingOIDCScope ?? []
    if (ticked(oidc) !== '') grant.addOIDCScope(ticked(oidc))
    if (unticked(oidc) !== '') grant.rejectOIDCScope(unticked(oidc))
    if (missing.missingOIDCClaims !== undefined) grant.addOIDCClaims(missing.missingOIDCClaims)
    for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      if (ticked(scopes) !== '') grant.addResourceScope(resource, ticked(scopes))
      if (unticked(scopes) !== '') grant.rejectResourceScope(resource, unticked(scopes))
    }
    const grantId = await grant.save()
    signIns += 1
    return provider.interactionFinished(req, res, { consent: { grantId } })
  }

  async function signIn(authorizationUrl: URL | string): Promise<URL> {
    const jar = new Map<string, string>()
    let url = new URL(authorizationUrl)
    for (let hop = 0; hop < 10; hop++) {
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
      const res = await fetch(url, {
        redirect: 'manual',
        headers: cookie === '' ? {} : { cookie },
      })
      for (const line of res.headers.getSetCookie()) {
        const [pair = ''] = line.split(';')
        const at = pair.indexOf('=')
        const name = pair.slice(0, at).trim()
        const value = pair.slice(at + 1).trim()
        // An emptied or expired cookie is the AS deleting it.
        if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name)
        else jar.set(name, value)
      }
      const location = res.headers.get('location')
      const body = await res.text()
      if (res.status < 300 || res.status >= 400 || location === null) {
        throw new Error(`sign-in stopped at ${url.href}: HTTP ${res.status} ${body.slice(0, 300)}`)
      }
      url = new URL(location, url)
      if (url.origin !== issuer) return url
    }
    throw new Error('sign-in: too many redirects')
  }

  async function issueToken(resource: string, scope: string): Promise<string> {
    const redirectUri = 'http://127.0.0.1/callback'
    const registered = (await postJson(`${issuer}/reg`, {
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
    })) as { client_id: string }
    const verifier = randomBytes(32).toString('base64url')
    const authorize = new URL(`${issuer}/auth`)
    for (const [k, v] of Object.entries({
      client_id: registered.client_id,
      response_type: 'code',
      redirect_uri: redirectUri,
      scope,
      resource,
      state: randomUUID(),
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    })) {
      authorize.searchParams.set(k, v)
    }
    const callback = await signIn(authorize)
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: callback.searchParams.get('code') ?? '',
        redirect_uri: redirectUri,
        code_verifier: verifier,
        client_id: registered.client_id,
        resource,
      }),
    })
    const body = (await res.json()) as { access_token?: string }
    if (res.status !== 200 || body.access_token === undefined) {
      throw new Error(`token request failed: HTTP ${res.status} ${JSON.stringify(body)}`)
    }
    return body.access_token
  }

  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    get kid() {
      return current.kid
    },
    requests,
    grants,
    declined,
    get signIns() {
      return signIns
    },
    errors,
    signIn,
    rotateSigningKey() {
      current = build()
      return Promise.resolve()
    },
    issueToken,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** A gateway whose `auth.publicUrl` is its own URL, trusting `as`, in front of `servers`. */
export async function gatewayTrusting(
  as: TestAuthorizationServer,
  servers: Readonly<Record<string, Pick<TestServer, 'url'>>>,
  options: {
    /** 'issuer': no jwksUrl, the gateway discovers it from the issuer's metadata. */
    readonly keys?: 'jwksUrl' | 'issuer'
    /** More `auth.jwt` settings, given the gateway's public URL. */
    readonly jwt?: (publicUrl: string) => Readonly<Record<string, unknown>>
    /** Every server's `requiredScopes` (default [mcp:tools]). */
    readonly requiredScopes?: readonly string[]
  } = {},
): Promise<TestGateway> {
  const keys = options.keys === 'issuer' ? {} : { jwksUrl: as.jwksUri }
  const config = (publicUrl: string) => ({
    auth: {
      publicUrl,
      jwt: {
        issuer: as.issuer,
        ...keys,
        // Five minutes: a test's key rotation (and its clock jumps) come within it, the case
        // where the cooldown must not lock users out (docs/auth.md, Key fetching).
        jwksCooldownMs: 300_000,
        ...options.jwt?.(publicUrl),
      },
    },
    servers: Object.fromEntries(
      Object.entries(servers).map(([name, s]) => [
        name,
        { upstreams: [{ url: s.url }], requiredScopes: options.requiredScopes ?? ['mcp:tools'] },
      ]),
    ),
  })
  // The port is known once listening: start, then reload with publicUrl = the gateway's own URL.
  const gw = await startTestGateway(config('http://127.0.0.1'), {
    admin: false,
    // Date read at each use: a test that moves the clock (vi.setSystemTime) moves the AS's,
    // the client's and the gateway's together.
    start: { auth: { now: () => Date.now() } },
  })
  const text = stringify({ listen: { host: '127.0.0.1', port: 0 }, ...config(gw.url) })
  await gw.reload(parseConfigText(text, { dir: process.cwd(), env: {} }))
  return gw
}

/**
 * oidc-provider's outgoing fetch, trusting `ca`. It replaces the provider's own dispatcher, whose
 * SSRF guard refuses loopback addresses: a test's documents are served on 127.0.0.1.
 */
function fetcherTrusting(ca: string | undefined) {
  if (ca === undefined) return undefined
  const dispatcher = new Agent({ connect: { ca } })
  return (url: string, options: Record<string, unknown>) =>
    undiciFetch(url, { ...options, dispatcher })
}

/** What oidc-provider stores (clients, grants, codes, tokens, sessions), as its adapter gets it. */
type Payload = Record<string, unknown> & { uid?: string; grantId?: string; consumed?: number }

/**
 * oidc-provider's adapter interface over one Map, shared by every Provider of one server (its
 * database). Entries are kept until the server closes: a test never outlives the TTLs that matter.
 */
function storeFor(rows: Map<string, Payload>) {
  return class Store {
    readonly #model: string
    constructor(model: string) {
      this.#model = model
    }
    #key(id: string): string {
      return `${this.#model}:${id}`
    }
    upsert(id: string, payload: Payload): Promise<void> {
      rows.set(this.#key(id), payload)
      return Promise.resolve()
    }
    find(id: string): Promise<Payload | undefined> {
      return Promise.resolve(rows.get(this.#key(id)))
    }
    findByUid(uid: string): Promise<Payload | undefined> {
      const prefix = `${this.#model}:`
      for (const [k, v] of rows)
        if (k.startsWith(prefix) && v.uid === uid) return Promise.resolve(v)
      return Promise.resolve(undefined)
    }
    findByUserCode(): Promise<undefined> {
      return Promise.resolve(undefined)
    }
    consume(id: string): Promise<void> {
      const row = rows.get(this.#key(id))
      if (row !== undefined) row.consumed = Math.floor(Date.now() / 1000)
      return Promise.resolve()
    }
    destroy(id: string): Promise<void> {
      rows.delete(this.#key(id))
      return Promise.resolve()
    }
    revokeByGrantId(grantId: string): Promise<void> {
      for (const [k, v] of rows) if (v.grantId === grantId) rows.delete(k)
      return Promise.resolve()
    }
  }
}

/** A fresh RS256 signing key as a private JWK with its own `kid`. */
function signingKey(): { jwk: Record<string, unknown>; kid: string } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const kid = randomUUID()
  return { jwk: { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' }, kid }
}

async function postJson(url: string, body: object): Promise<unknown> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  const json: unknown = await res.json()
  if (res.status !== 201) throw new Error(`POST ${url}: HTTP ${res.status} ${JSON.stringify(json)}`)
  return json
}
