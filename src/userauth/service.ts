import type { UserAuthConfig } from '../config/user-auth-schema.js'
import {
  fetchMetadata,
  revokeToken,
  tokenRequest,
  type OAuthClient,
  type TokenAnswer,
} from './oauth.js'

/** Where the service's authorization server takes requests, once known. */
export interface ServiceEndpoints {
  /** The AS's issuer identifier, when known (RFC 9207 checks `iss` against it). */
  readonly issuer: string | undefined
  readonly authorization: string
  readonly token: string
  readonly revocation: string | undefined
  /** The AS said it sends `iss` with every authorization response (RFC 9207 §3). */
  readonly issRequired: boolean
}

/**
 * The gateway as an OAuth client of one server's service (`servers.<name>.userAuth`): its
 * endpoints (configured, or from the issuer's metadata, looked up once and again after a failure),
 * and the three requests it makes there: code exchange, refresh, revocation.
 */
export class ServiceClient {
  readonly #cfg: UserAuthConfig
  readonly client: OAuthClient
  /** RFC 8707 resource the user's token is asked for. */
  readonly resource: string
  #endpoints: Promise<ServiceEndpoints> | undefined

  constructor(
    cfg: UserAuthConfig,
    /** The server's first upstream URL: the default `resource`. */
    upstream: string,
  ) {
    this.#cfg = cfg
    this.client = {
      clientId: cfg.clientId,
      clientSecret: cfg.clientSecret,
      clientAuth: cfg.clientAuth,
    }
    this.resource = cfg.resource ?? upstream
  }

  get scopes(): readonly string[] {
    return this.#cfg.scopes
  }

  endpoints(): Promise<ServiceEndpoints> {
    this.#endpoints ??= this.#resolve().catch((err: unknown) => {
      // Looked up again next time: the AS may have been down, or its metadata fixed since.
      this.#endpoints = undefined
      throw err
    })
    return this.#endpoints
  }

  async #resolve(): Promise<ServiceEndpoints> {
    const c = this.#cfg
    const meta = c.issuer === undefined ? undefined : await fetchMetadata(c.issuer, c.timeoutMs)
    const authorization = c.authorizationEndpoint ?? meta?.authorizationEndpoint
    const token = c.tokenEndpoint ?? meta?.tokenEndpoint
    // The schema asks for an issuer or both endpoints, so one of the two always names them.
    if (authorization === undefined || token === undefined) throw new Error('no endpoints')
    return {
      issuer: c.issuer,
      authorization,
      token,
      revocation: c.revocationEndpoint ?? meta?.revocationEndpoint,
      issRequired: meta?.issParameterSupported === true,
    }
  }

  /** RFC 6749 §4.1.3 with the PKCE verifier (RFC 7636 §4.5) and the resource (RFC 8707 §2.2). */
  async exchangeCode(code: string, redirectUri: string, verifier: string): Promise<TokenAnswer> {
    const { token } = await this.endpoints()
    return tokenRequest(
      token,
      this.client,
      {
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
        resource: this.resource,
      },
      this.#cfg.timeoutMs,
    )
  }

  /** RFC 6749 §6, for the same resource (RFC 8707 §2.2). */
  async refresh(refreshToken: string): Promise<TokenAnswer> {
    const { token } = await this.endpoints()
    return tokenRequest(
      token,
      this.client,
      { grant_type: 'refresh_token', refresh_token: refreshToken, resource: this.resource },
      this.#cfg.timeoutMs,
    )
  }

  /** RFC 7009 at the AS, when it has a revocation endpoint; false when it has none. */
  async revoke(token: string, hint: 'access_token' | 'refresh_token'): Promise<boolean> {
    const { revocation } = await this.endpoints()
    if (revocation === undefined) return false
    await revokeToken(revocation, this.client, token, hint, this.#cfg.timeoutMs)
    return true
  }

  /** How long before `expires_in` a token is refreshed. */
  get refreshBeforeMs(): number {
    return this.#cfg.refreshBeforeMs
  }

  get timeoutMs(): number {
    return this.#cfg.timeoutMs
  }
}
