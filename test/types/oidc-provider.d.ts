/** The slice of oidc-provider 9's API the test authorization server uses (the package ships no types). */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'
  import type { EventEmitter } from 'node:events'

  /** The parts of a request context the configuration callbacks and events read. */
  export interface KoaContextWithOIDC {
    readonly oidc: {
      readonly params?: Readonly<Record<string, unknown>>
    }
  }

  export interface Account {
    readonly accountId: string
    claims(): Promise<Record<string, unknown>> | Record<string, unknown>
  }

  export interface ResourceServer {
    readonly scope: string
    readonly audience?: string
    readonly accessTokenTTL?: number
    readonly accessTokenFormat?: 'opaque' | 'jwt'
    readonly jwt?: { readonly sign?: { readonly alg: string } }
  }

  export interface Configuration {
    readonly adapter?: unknown
    readonly clients?: readonly Record<string, unknown>[]
    readonly cookies?: { readonly keys?: readonly string[] }
    readonly jwks?: { readonly keys: readonly Record<string, unknown>[] }
    readonly scopes?: readonly string[]
    readonly claims?: Readonly<Record<string, readonly string[] | null>>
    readonly features?: Readonly<Record<string, unknown>>
    readonly interactions?: {
      readonly url: (ctx: KoaContextWithOIDC, interaction: { readonly uid: string }) => string
    }
    readonly findAccount?: (ctx: KoaContextWithOIDC, id: string) => Promise<Account | undefined>
    readonly issueRefreshToken?: (
      ctx: KoaContextWithOIDC,
      client: Client,
    ) => Promise<boolean> | boolean
    readonly ttl?: Readonly<Record<string, number | ((...args: never[]) => number)>>
    readonly pkce?: { readonly required?: () => boolean }
    readonly enabledJWA?: Readonly<Record<string, readonly string[]>>
    /** Every outgoing request the provider makes (client ID metadata documents, jwks_uri). */
    readonly fetch?: (url: string, options: Record<string, unknown>) => Promise<unknown>
    readonly renderError?: (ctx: unknown, out: Record<string, unknown>, error: Error) => void
  }

  export interface Client {
    readonly clientId: string
    grantTypeAllowed(type: string): boolean
  }

  export interface PromptDetails {
    readonly missingOIDCScope?: readonly string[]
    readonly missingOIDCClaims?: readonly string[]
    readonly missingResourceScopes?: Readonly<Record<string, readonly string[]>>
  }

  export interface Interaction {
    readonly uid: string
    readonly grantId?: string
    readonly prompt: { readonly name: string; readonly details: PromptDetails }
    readonly params: Readonly<Record<string, unknown>> & { readonly client_id: string }
    readonly session?: { readonly accountId: string }
  }

  export interface Grant {
    addOIDCScope(scope: string): void
    addOIDCClaims(claims: readonly string[]): void
    addResourceScope(resource: string, scope: string): void
    rejectOIDCScope(scope: string): void
    rejectResourceScope(resource: string, scope: string): void
    save(): Promise<string>
  }

  export interface GrantConstructor {
    new (init: { accountId: string; clientId: string }): Grant
    find(id: string): Promise<Grant | undefined>
  }

  export default class Provider extends EventEmitter {
    constructor(issuer: string, configuration?: Configuration)
    readonly issuer: string
    readonly Grant: GrantConstructor
    callback(): (req: IncomingMessage, res: ServerResponse) => void
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>
  }
}
