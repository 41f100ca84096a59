import { createLocalJWKSet, errors, jwtVerify, type JSONWebKeySet } from 'jose'
import { BoundedFetchFailure, fetchBounded } from '../auth/bounded-fetch.js'
import { fetchMetadata, OAuthFailure, tokenRequest, type OAuthClient } from './oauth.js'

/** A JWK Set is a few KiB; a larger answer is refused while it streams in. */
const MAX_JWKS_BYTES = 256 * 1024
/** How long the sign-in reuses an issuer's metadata and keys. */
const REUSE_MS = 10 * 60_000
/** Asymmetric algorithms only, as for access tokens (auth/verifier.ts). */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'EdDSA']

interface Issuer {
  readonly authorization: string
  readonly token: string
  readonly keys: ReturnType<typeof createLocalJWKSet>
}

/** The person in the browser, as the gateway's own issuer signed them in. */
export interface SignedIn {
  readonly iss: string
  readonly sub: string
}

/**
 * The connect page's sign-in at the gateway's own issuer (OpenID Connect Core §3.1: code flow,
 * with PKCE and a nonce), so the gateway knows who opened a connect link before it lets them
 * connect an account (spec 2026-07-28 client/elicitation §Phishing: the user who completes the
 * flow must be the user the link was made for). The issuer is the caller token's `iss`, which
 * `auth.jwt.issuer` accepted.
 */
export class GatewaySignIn {
  readonly #issuers = new Map<string, Promise<Issuer>>()

  constructor(
    private readonly client: OAuthClient,
    private readonly timeoutMs: number,
    private readonly now: () => number,
  ) {}

  /** Where the browser signs in; `redirectUri` is `{publicUrl}/connect`. */
  async authorizationUrl(
    issuer: string,
    redirectUri: string,
    state: string,
    nonce: string,
    challenge: string,
  ): Promise<string> {
    const { authorization } = await this.#issuer(issuer)
    const url = new URL(authorization)
    const params = {
      response_type: 'code',
      client_id: this.client.clientId,
      redirect_uri: redirectUri,
      scope: 'openid',
      state,
      nonce,
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
    return url.href
  }

  /**
   * The code exchanged and its ID token checked (OpenID Connect Core §3.1.3.7): signature by the
   * issuer's keys, `iss`, `aud` = the login client, `exp`, and the nonce of this sign-in.
   */
  async finish(
    issuer: string,
    code: string,
    redirectUri: string,
    verifier: string,
    nonce: string,
  ): Promise<SignedIn> {
    const found = await this.#issuer(issuer)
    const answer = await tokenRequest(
      found.token,
      this.client,
      {
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
      },
      this.timeoutMs,
    )
    if (answer.idToken === undefined) throw new OAuthFailure('the sign-in returned no ID token')
    try {
      const { payload } = await jwtVerify(answer.idToken, found.keys, {
        issuer,
        audience: this.client.clientId,
        algorithms: ALGORITHMS,
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(this.now()),
      })
      // SECURITY: the nonce ties the ID token to this sign-in (OpenID Connect Core §3.1.3.7 11).
      if (payload['nonce'] !== nonce) throw new OAuthFailure('ID token nonce mismatch')
      return { iss: issuer, sub: payload.sub ?? '' }
    } catch (err) {
      if (err instanceof OAuthFailure) throw err
      if (err instanceof errors.JWKSNoMatchingKey) this.#issuers.delete(issuer)
      throw new OAuthFailure('ID token refused', false, { cause: err })
    }
  }

  #issuer(issuer: string): Promise<Issuer> {
    const held = this.#issuers.get(issuer)
    if (held !== undefined) return held
    const found = this.#discover(issuer).then(
      (i) => {
        // Let go once stale, so rotated keys and moved endpoints are found again.
        setTimeout(() => this.#issuers.delete(issuer), REUSE_MS).unref()
        return i
      },
      (err: unknown) => {
        this.#issuers.delete(issuer)
        throw err
      },
    )
    this.#issuers.set(issuer, found)
    return found
  }

  async #discover(issuer: string): Promise<Issuer> {
    const meta = await fetchMetadata(issuer, this.timeoutMs)
    if (meta.jwksUri === undefined) throw new OAuthFailure('the issuer names no jwks_uri')
    let text: string
    try {
      ;({ text } = await fetchBounded(meta.jwksUri, {
        method: 'GET',
        headers: { accept: 'application/json' },
        timeoutMs: this.timeoutMs,
        maxBytes: MAX_JWKS_BYTES,
      }))
    } catch (err) {
      const why = err instanceof BoundedFetchFailure ? err.message : 'failed'
      throw new OAuthFailure(`issuer keys ${why}`, false, { cause: err })
    }
    let keys: ReturnType<typeof createLocalJWKSet>
    try {
      keys = createLocalJWKSet(JSON.parse(text) as JSONWebKeySet)
    } catch (err) {
      throw new OAuthFailure('issuer keys are not a JWK Set', false, { cause: err })
    }
    return { authorization: meta.authorizationEndpoint, token: meta.tokenEndpoint, keys }
  }
}
