import {
  Client,
  StreamableHTTPClientTransport,
  type FetchLike,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
} from '@modelcontextprotocol/client'
import { onTestFinished } from 'vitest'
import type { TestAuthorizationServer } from './authorization-server.js'
import type { TestGateway } from './gateway.js'

/*
 * The application side of the official client's OAuth support (`OAuthClientProvider`), for the
 * sign-in tests (test/integration/oauth-*.test.ts).
 */

/** One HTTP exchange the client made (MCP, metadata, registration, token). */
export interface Hop {
  readonly method: string
  readonly url: string
  readonly status: number
  readonly challenge: string | null
}

/** The client's fetch, recording every exchange in `hops`. */
function recordingFetch(hops: Hop[]): FetchLike {
  return async (input, init) => {
    const res = await fetch(input, init)
    hops.push({
      method: init?.method ?? 'GET',
      url: input instanceof URL ? input.href : String(input),
      status: res.status,
      challenge: res.headers.get('www-authenticate'),
    })
    return res
  }
}

/**
 * The application's side of the official client's OAuth support: in-memory storage, and a
 * "browser" that is the AS helper's sign-in (login and consent), keeping the callback URL.
 */
export class InMemoryOAuthClient implements OAuthClientProvider {
  /** Never fetched: the AS redirects the "browser" here and the test hands the code over. */
  readonly redirectUrl = 'http://127.0.0.1:1/oauth/callback'
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'oauth-sign-in test',
    redirect_uris: [this.redirectUrl],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  }
  /** Every authorization URL the client sent the user to. */
  readonly authorizations: URL[] = []
  /** Where the AS sent the browser back to, after the last sign-in. */
  callback: URL | undefined
  #client: StoredOAuthClientInformation | undefined
  #tokens: StoredOAuthTokens | undefined
  #verifier = ''
  #discovery: OAuthDiscoveryState | undefined

  /**
   * An https URL serving {@link clientMetadata} as a client ID metadata document: the client uses
   * it as its `client_id` where the AS supports that, instead of registering.
   */
  readonly clientMetadataUrl?: string

  constructor(
    readonly as: TestAuthorizationServer,
    clientMetadataUrl?: string,
  ) {
    if (clientMetadataUrl !== undefined) this.clientMetadataUrl = clientMetadataUrl
  }

  clientInformation(): StoredOAuthClientInformation | undefined {
    return this.#client
  }
  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.#client = info
  }
  tokens(): StoredOAuthTokens | undefined {
    return this.#tokens
  }
  saveTokens(tokens: StoredOAuthTokens): void {
    this.#tokens = tokens
  }
  async redirectToAuthorization(url: URL): Promise<void> {
    this.authorizations.push(url)
    this.callback = await this.as.signIn(url)
  }
  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier
  }
  codeVerifier(): string {
    return this.#verifier
  }
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.#discovery = state
  }
  discoveryState(): OAuthDiscoveryState | undefined {
    return this.#discovery
  }

  /** The access token the client holds now. */
  accessToken(): string {
    const token = this.#tokens?.access_token
    if (token === undefined) throw new Error('not signed in')
    return token
  }
}

export const ERAS = [
  { era: '2026-07-28', options: { versionNegotiation: { mode: 'auto' } } },
  { era: '2025-11-25', options: {} },
] as const

/** The official client with `user`'s OAuth provider, on `url`, recording into `hops`. */
export function clientFor(
  url: string,
  user: InMemoryOAuthClient,
  hops: Hop[],
  options: (typeof ERAS)[number]['options'],
): { client: Client; transport: StreamableHTTPClientTransport } {
  const client = new Client({ name: 'oauth-test', version: '1.0.0' }, options)
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    authProvider: user,
    fetch: recordingFetch(hops),
  })
  onTestFinished(() => client.close())
  return { client, transport }
}

/** `METHOD path status` of each hop, the origin cut to its role. */
export function trace(
  hops: readonly Hop[],
  gw: TestGateway,
  as: TestAuthorizationServer,
): string[] {
  return hops.map((h) => {
    const url = h.url.replace(gw.url, 'GW').replace(as.issuer, 'AS')
    return `${h.method} ${url} ${h.status}`
  })
}
