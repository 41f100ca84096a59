import type { Logger } from 'pino'
import { flowName, openFlow, openLink, sealFlow, type FlowState } from './links.js'
import type { GatewaySignIn } from './login.js'
import { OAuthFailure } from './oauth.js'
import { pkcePair } from './pkce.js'
import { digest, randomId, type UserKeys } from './seal.js'
import { StoreUnavailable, type TokenStore } from './store.js'
import type { UserTokens } from './tokens.js'

/** The browser cookie a connect flow is bound to (docs/auth.md §The connect page). */
export const CONNECT_COOKIE = 'mcp_edge_connect'

/** What the connect routes answer: a redirect, or a page with nothing secret on it. */
export type ConnectResult =
  | {
      readonly kind: 'redirect'
      readonly location: string
      /** A new value of the browser cookie, when this step binds the flow to the browser. */
      readonly cookie?: string | undefined
    }
  | {
      readonly kind: 'page'
      readonly status: number
      readonly title: string
      readonly text: string
      /** The flow is over: the browser cookie is cleared. */
      readonly done: boolean
    }

/** The query of a redirect back from an authorization server (RFC 6749 §4.1.2, RFC 9207 §2). */
export interface RedirectQuery {
  readonly code?: string | undefined
  readonly state?: string | undefined
  readonly iss?: string | undefined
  readonly error?: string | undefined
}

/** What the flow reads of one config (userauth/user-auth.ts). */
export interface ConnectContext {
  readonly store: TokenStore
  readonly keys: UserKeys
  /** `auth.publicUrl` without a trailing slash. */
  readonly publicUrl: string
  readonly now: () => number
  readonly signIn: GatewaySignIn
  readonly sources: ReadonlyMap<string, UserTokens>
  readonly log: Logger | undefined
}

/**
 * The connect page (spec 2026-07-28 client/elicitation §URL Mode Elicitation for OAuth Flows, the
 * connect URL of §Phishing): a sealed single-use link → sign-in at the gateway's own issuer, the
 * subject compared with the link's → authorization code with PKCE S256 at the service's AS
 * (RFC 7636, with `resource` RFC 8707 and the scopes) → the callback checks `state`, the browser
 * and `iss` (RFC 9207) and stores the tokens. Hono-free: pipeline/connect.ts serves it.
 *
 * Each step's state lives in the store under a random id, taken once; the browser carries only
 * that id and a cookie whose hash the flow holds, so a flow started in one browser cannot be
 * finished in another (a victim lured to the AS with an attacker's flow gets nothing stored).
 */
export class ConnectFlow {
  constructor(private readonly ctx: ConnectContext) {}

  /** GET {publicUrl}/connect/{server}?state=… */
  async start(server: string, state: string | undefined): Promise<ConnectResult> {
    const source = this.ctx.sources.get(server)
    if (source === undefined) return page(404, 'Unknown server', 'No such server to connect to.')
    const now = this.ctx.now()
    const link = state === undefined ? 'invalid' : openLink(this.ctx.keys, state, server, now)
    if (link === 'invalid') return page(400, 'Invalid link', 'This connect link is not valid.')
    if (link === 'expired')
      return page(400, 'Link expired', 'This connect link has expired. Ask your client again.')
    return this.#guard(async () => {
      // SECURITY: single use: a link opened once (by anyone) never starts a second flow.
      if (!(await source.claimLink(link.id, link.exp - now)))
        return page(400, 'Link used', 'This connect link was already used. Ask your client again.')
      const cookie = randomId()
      const { verifier, challenge } = pkcePair()
      const nonce = randomId()
      const id = await this.#save({
        phase: 'login',
        iss: link.iss,
        sub: link.sub,
        server,
        verifier,
        nonce,
        browser: digest(cookie),
        exp: link.exp,
      })
      const location = await this.ctx.signIn.authorizationUrl(
        link.iss,
        this.#url('/connect'),
        id,
        nonce,
        challenge,
      )
      return { kind: 'redirect', location, cookie }
    })
  }

  /** GET {publicUrl}/connect: back from the gateway's own issuer (its sign-in's redirect URI). */
  async signedIn(q: RedirectQuery, cookie: string | undefined): Promise<ConnectResult> {
    return this.#guard(async () => {
      const flow = await this.#take(q.state, 'login', cookie)
      if (typeof flow === 'object' && 'kind' in flow) return flow
      if (q.error !== undefined || q.code === undefined)
        return page(400, 'Not signed in', 'The sign-in did not complete.', true)
      // RFC 9207 §2.4: an `iss` that is not the issuer asked is a mix-up; refused.
      if (q.iss !== undefined && q.iss !== flow.iss)
        return page(400, 'Sign-in refused', 'The sign-in came back from another issuer.', true)
      const signed = await this.ctx.signIn.finish(
        flow.iss,
        q.code,
        this.#url('/connect'),
        flow.verifier,
        flow.nonce ?? '',
      )
      // SECURITY: the person in the browser must be the user the link was made for (spec
      // 2026-07-28 client/elicitation §Phishing); a link forwarded to someone else stops here.
      if (signed.iss !== flow.iss || signed.sub !== flow.sub) {
        this.ctx.log?.warn(
          { server: flow.server },
          'connect: signed in as another user than the link was made for; refused',
        )
        return page(
          403,
          'Wrong user',
          'You signed in as another user than the one this link was made for. Nothing was connected.',
          true,
        )
      }
      const source = this.ctx.sources.get(flow.server)
      if (source === undefined) return page(404, 'Unknown server', 'No such server.', true)
      const { verifier, challenge } = pkcePair()
      const id = await this.#save({ ...flow, phase: 'service', verifier, nonce: undefined })
      const ep = await source.client.endpoints()
      const url = new URL(ep.authorization)
      const params: Record<string, string> = {
        response_type: 'code',
        client_id: source.client.client.clientId,
        redirect_uri: this.#callbackUrl(flow.server),
        state: id,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        resource: source.client.resource,
      }
      if (source.client.scopes.length > 0) params['scope'] = source.client.scopes.join(' ')
      for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
      return { kind: 'redirect', location: url.href }
    })
  }

  /** GET {publicUrl}/connect/{server}/callback: back from the service's AS. */
  async callback(
    server: string,
    q: RedirectQuery,
    cookie: string | undefined,
  ): Promise<ConnectResult> {
    return this.#guard(async () => {
      const flow = await this.#take(q.state, 'service', cookie)
      if (typeof flow === 'object' && 'kind' in flow) return flow
      const source = this.ctx.sources.get(server)
      // SECURITY: a flow finishes at the callback of the server it was started for.
      if (source === undefined || flow.server !== server)
        return page(400, 'Invalid request', 'This callback does not belong to this flow.', true)
      if (q.error !== undefined || q.code === undefined)
        return page(400, 'Not connected', `${source.service} did not grant access.`, true)
      const ep = await source.client.endpoints()
      // SECURITY: RFC 9207 §2.4: the answer must come from the AS the request went to (mix-up).
      const wrongIss = q.iss !== undefined && ep.issuer !== undefined && q.iss !== ep.issuer
      if (wrongIss || (q.iss === undefined && ep.issRequired))
        return page(400, 'Not connected', 'The answer came from another server.', true)
      const answer = await source.client.exchangeCode(
        q.code,
        this.#callbackUrl(server),
        flow.verifier,
      )
      await source.connect(flow.iss, flow.sub, answer)
      return page(
        200,
        'Connected',
        `Your account at ${source.service} is connected. You can close this window and go back to your client.`,
        true,
      )
    })
  }

  /** The flow of `state`, taken once, checked for its step, expiry and browser; else a page. */
  async #take(
    state: string | undefined,
    phase: FlowState['phase'],
    cookie: string | undefined,
  ): Promise<FlowState | Extract<ConnectResult, { kind: 'page' }>> {
    const unknown = page(400, 'Unknown request', 'This request is not known or was already used.')
    if (state === undefined || !/^[A-Za-z0-9_-]{43}$/.test(state)) return unknown
    const sealed = await this.ctx.store.take(flowName(state))
    const flow = sealed === undefined ? undefined : openFlow(this.ctx.keys, state, sealed)
    if (flow === undefined || flow.phase !== phase) return unknown
    if (this.ctx.now() >= flow.exp)
      return page(400, 'Expired', 'This connect flow has expired. Ask your client again.', true)
    // SECURITY: bound to the browser that opened the link (the cookie's hash, set at the start).
    if (cookie === undefined || digest(cookie) !== flow.browser)
      return page(403, 'Other browser', 'Finish connecting in the browser that started it.', true)
    return flow
  }

  async #save(flow: FlowState): Promise<string> {
    const id = randomId()
    const ttl = Math.max(1, flow.exp - this.ctx.now())
    await this.ctx.store.set(flowName(id), sealFlow(this.ctx.keys, id, flow), ttl)
    return id
  }

  #url(path: string): string {
    return `${this.ctx.publicUrl}${path}`
  }

  #callbackUrl(server: string): string {
    return this.#url(`/connect/${encodeURIComponent(server)}/callback`)
  }

  /** Failures of the store or an authorization server become a page; nothing else is caught. */
  async #guard(step: () => Promise<ConnectResult>): Promise<ConnectResult> {
    try {
      return await step()
    } catch (err) {
      if (err instanceof StoreUnavailable)
        return page(503, 'Unavailable', 'The token store is not available. Try again shortly.')
      if (err instanceof OAuthFailure) {
        this.ctx.log?.warn({ err: err.message }, 'connect: authorization server request failed')
        return page(502, 'Not connected', 'The authorization server could not be reached.', true)
      }
      throw err
    }
  }
}

function page(
  status: number,
  title: string,
  text: string,
  done = false,
): Extract<ConnectResult, { kind: 'page' }> {
  return { kind: 'page', status, title, text, done }
}
