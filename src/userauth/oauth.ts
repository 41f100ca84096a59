import { BoundedFetchFailure, fetchBounded } from '../auth/bounded-fetch.js'
import { DiscoveryFailure, fetchIssuerMetadata } from '../auth/discovery.js'

/** Token answers are a few KiB; anything larger is refused while it streams in. */
const MAX_ANSWER_BYTES = 64 * 1024
/** RFC 6749 §5.2: an error answer is a 400 (401 for a client authentication failure). */
const ERROR_STATUSES: ReadonlySet<number> = new Set([400, 401])
// RFC 6750 §2.1 b64token: what may follow "Bearer " in a header the gateway builds.
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/

/** How the gateway authenticates as an OAuth client (RFC 6749 §2.3.1); no secret: a public client. */
export interface OAuthClient {
  readonly clientId: string
  readonly clientSecret?: string | undefined
  readonly clientAuth?: 'basic' | 'post' | undefined
}

/** What an authorization server's metadata says (RFC 8414 §2, OpenID Connect Discovery §3). */
export interface ServerMetadata {
  readonly issuer: string
  readonly authorizationEndpoint: string
  readonly tokenEndpoint: string
  readonly revocationEndpoint: string | undefined
  readonly introspectionEndpoint: string | undefined
  readonly jwksUri: string | undefined
  /** RFC 9207 §3: the AS sends `iss` with every authorization response. */
  readonly issParameterSupported: boolean
}

/** A token or metadata request that failed; `message` is short fixed text, safe to show. */
export class OAuthFailure extends Error {
  override readonly name = 'OAuthFailure'
  constructor(
    message: string,
    /** The AS refused the grant (RFC 6749 §5.2 `invalid_grant`): the grant is gone for good. */
    readonly invalidGrant = false,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/**
 * The metadata of `issuer` (auth/discovery.ts `fetchIssuerMetadata`: the first document that
 * answers, its `issuer` the one asked for, byte for byte), with the endpoints this client needs.
 */
export async function fetchMetadata(issuer: string, timeoutMs: number): Promise<ServerMetadata> {
  let doc: Record<string, unknown>
  try {
    doc = await fetchIssuerMetadata(issuer, timeoutMs)
  } catch (err) {
    if (!(err instanceof DiscoveryFailure)) throw err
    throw new OAuthFailure(`authorization server ${err.message}`, false, { cause: err })
  }
  const endpoint = (key: string): string | undefined => {
    const v = doc[key]
    return typeof v === 'string' && URL.canParse(v) ? v : undefined
  }
  const authorization = endpoint('authorization_endpoint')
  const token = endpoint('token_endpoint')
  if (authorization === undefined || token === undefined)
    throw new OAuthFailure('metadata lacks authorization_endpoint or token_endpoint')
  return {
    issuer,
    authorizationEndpoint: authorization,
    tokenEndpoint: token,
    revocationEndpoint: endpoint('revocation_endpoint'),
    introspectionEndpoint: endpoint('introspection_endpoint'),
    jwksUri: endpoint('jwks_uri'),
    issParameterSupported: doc['authorization_response_iss_parameter_supported'] === true,
  }
}

/** A token endpoint's success answer (RFC 6749 §5.1). */
export interface TokenAnswer {
  readonly accessToken: string
  readonly refreshToken: string | undefined
  /** Seconds, when the AS said. */
  readonly expiresIn: number | undefined
  readonly scope: string | undefined
  readonly idToken: string | undefined
}

/**
 * One token request (RFC 6749 §4.1.3 code, §6 refresh): the client authenticated as configured,
 * bounded in time and size, no redirects (they would carry the code and the secret elsewhere).
 * An `invalid_grant` answer is reported as such: the caller drops what it held.
 */
export async function tokenRequest(
  endpoint: string,
  client: OAuthClient,
  params: Readonly<Record<string, string>>,
  timeoutMs: number,
): Promise<TokenAnswer> {
  const { status, text } = await post(endpoint, client, params, timeoutMs, 'token endpoint')
  const body = parseObject(text, 'token endpoint answer')
  if (status !== 200) {
    const code = typeof body['error'] === 'string' ? body['error'] : 'error'
    throw new OAuthFailure(`token endpoint answered ${status}`, code === 'invalid_grant')
  }
  const token = body['access_token']
  // SECURITY: the value goes into a header the gateway builds; nothing but a b64token may.
  if (typeof token !== 'string' || !B64TOKEN.test(token))
    throw new OAuthFailure('no usable access_token')
  const type = body['token_type']
  if (typeof type !== 'string' || type.toLowerCase() !== 'bearer')
    throw new OAuthFailure('token_type is not Bearer')
  const str = (key: string): string | undefined =>
    typeof body[key] === 'string' && body[key] !== '' ? body[key] : undefined
  const expires = body['expires_in']
  return {
    accessToken: token,
    refreshToken: str('refresh_token'),
    expiresIn: typeof expires === 'number' && expires > 0 ? expires : undefined,
    scope: str('scope'),
    idToken: str('id_token'),
  }
}

/**
 * RFC 7009 revocation of one token at the AS. The answer is not needed beyond success: a token the
 * AS no longer knows is revoked all the same (RFC 7009 §2.2).
 */
export async function revokeToken(
  endpoint: string,
  client: OAuthClient,
  token: string,
  hint: 'access_token' | 'refresh_token',
  timeoutMs: number,
): Promise<void> {
  const { status } = await post(
    endpoint,
    client,
    { token, token_type_hint: hint },
    timeoutMs,
    'revocation endpoint',
  )
  if (status !== 200) throw new OAuthFailure(`revocation endpoint answered ${status}`)
}

/** A form POST to an OAuth endpoint with the client's authentication; 200 or an error answer. */
async function post(
  endpoint: string,
  client: OAuthClient,
  params: Readonly<Record<string, string>>,
  timeoutMs: number,
  what: string,
): Promise<{ status: number; text: string }> {
  const form = new URLSearchParams(params)
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  }
  const secret = client.clientSecret
  if (secret === undefined) form.set('client_id', client.clientId)
  else if (client.clientAuth === 'post') {
    form.set('client_id', client.clientId)
    form.set('client_secret', secret)
  } else {
    // RFC 6749 §2.3.1: each part form-urlencoded before Basic encoding.
    const pair = `${formEncode(client.clientId)}:${formEncode(secret)}`
    headers['authorization'] = `Basic ${Buffer.from(pair).toString('base64')}`
  }
  try {
    // SECURITY: bounded in time and size; a redirect is a failure (it would carry the code or
    // token and the client secret to wherever it points).
    return await fetchBounded(endpoint, {
      method: 'POST',
      headers,
      body: form.toString(),
      timeoutMs,
      maxBytes: MAX_ANSWER_BYTES,
      accept: ERROR_STATUSES,
    })
  } catch (err) {
    const why = err instanceof BoundedFetchFailure ? err.message : 'failed'
    throw new OAuthFailure(`${what} ${why}`, false, { cause: err })
  }
}

function parseObject(text: string, what: string): Record<string, unknown> {
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    throw new OAuthFailure(`${what} is not JSON`)
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new OAuthFailure(`${what} is not a JSON object`)
  return doc as Record<string, unknown>
}

function formEncode(s: string): string {
  return new URLSearchParams({ s }).toString().slice(2)
}
