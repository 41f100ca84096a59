import { existsSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import type { GatewayConfig, ServerConfig } from '../config/schema.js'
import { AuthCarryOver } from './carry-over.js'
import { checkKeyFiles } from './key-source.js'
import {
  challengesFor,
  metadataFor,
  metadataUrl,
  publicBase,
  resourceUrl,
  type Challenges,
  type ProtectedResourceMetadata,
} from './resource.js'
import type { TokenExchanger } from './token-exchange.js'
import type { UserTokenSource } from './user-tokens.js'
import { withIntrospection } from './introspection.js'
import { createVerifier, type Verifier } from './verifier.js'

/** Authentication of one server, compiled once per config. */
export interface ServerAuth {
  /** Accepted `aud` values: `auth.jwt.audience`, or this server's resource URI. */
  readonly audience: string | readonly string[]
  readonly requiredScopes: readonly string[]
  readonly challenges: Challenges
  /** This endpoint's RFC 9728 document URL: what every challenge it sends names. */
  readonly metadataUrl: string
  /** RFC 9728 document served at this server's well-known URL. */
  readonly metadata: ProtectedResourceMetadata
  /** RFC 8693 exchange for upstream credentials, when `tokenExchange` is configured. */
  readonly exchanger: TokenExchanger | undefined
  /** The user's own token at the service, when `userAuth` is configured (auth/user-tokens.ts). */
  readonly userTokens: UserTokenSource | undefined
}

/** Everything authentication needs at request time; part of the runtime swapped on reload. */
export interface AuthRuntime {
  readonly verifier: Verifier
  readonly servers: ReadonlyMap<string, ServerAuth>
  /** Served at the root well-known URL: the gateway as a whole (resource = publicUrl). */
  readonly rootMetadata: ProtectedResourceMetadata
  /** `auth.publicUrl`'s path ('' or '/prefix'), for matching well-known request paths. */
  readonly prefix: string
}

/**
 * Compiles `auth:` and every server's auth settings; undefined when auth is off. `carry` keeps
 * fetched keys and exchanged tokens from the previous config when their settings are unchanged.
 */
export function compileAuth(
  config: GatewayConfig,
  configDir: string,
  carry = new AuthCarryOver(),
): AuthRuntime | undefined {
  const auth = config.auth
  if (auth === undefined) return undefined
  const base = publicBase(auth.publicUrl)
  const issuers = acceptedIssuers(auth)
  // Accepted `aud` values instead of each server's own URL, for JWTs and introspected tokens.
  const audience = auth.jwt?.audience ?? auth.introspection?.audience
  // RFC 9728 §2: the AS whose tokens we accept; by default the issuers themselves.
  const authServers = auth.resourceMetadata?.authorizationServers ?? issuers
  const advertised = auth.resourceMetadata?.scopesSupported ?? []
  const servers = new Map<string, ServerAuth>()
  for (const [name, s] of Object.entries(config.servers)) {
    const resource = resourceUrl(base, name)
    const prm = metadataUrl(base, name)
    servers.set(name, {
      audience: audience ?? resource,
      requiredScopes: s.requiredScopes,
      challenges: challengesFor(prm, s.requiredScopes),
      metadataUrl: prm,
      // A scope a call may need must be one a client can find out about and request.
      metadata: metadataFor(resource, authServers, unique([...scopesOf(s), ...advertised])),
      exchanger: s.tokenExchange === undefined ? undefined : carry.exchanger(name, s.tokenExchange),
      userTokens: s.userAuth === undefined ? undefined : carry.userTokens(name, config),
    })
  }
  // A virtual server needs what every member needs: its endpoint reaches all of them
  // (docs/virtual-servers.md §Policy); members' own token exchange still applies per member.
  for (const [name, v] of Object.entries(config.virtualServers)) {
    const resource = resourceUrl(base, name)
    const members = v.members.flatMap((m) => config.servers[m] ?? [])
    const scopes = unique(members.flatMap((m) => m.requiredScopes))
    const prm = metadataUrl(base, name)
    servers.set(name, {
      audience: audience ?? resource,
      requiredScopes: scopes,
      challenges: challengesFor(prm, scopes),
      metadataUrl: prm,
      metadata: metadataFor(
        resource,
        authServers,
        unique([...members.flatMap(scopesOf), ...advertised]),
      ),
      exchanger: undefined,
      userTokens: undefined,
    })
  }
  const allRequired = Object.values(config.servers).flatMap(scopesOf)
  const maxTokenBytes = config.limits.maxTokenBytes
  const keys = auth.jwt === undefined ? undefined : carry.keySource(auth.jwt, configDir)
  const jwt =
    keys === undefined
      ? undefined
      : createVerifier(auth, configDir, { maxTokenBytes, keys, now: carry.now })
  const introspector =
    auth.introspection === undefined
      ? undefined
      : carry.introspector(auth.introspection, {
          issuers,
          clockToleranceSec: auth.jwt?.clockToleranceSec ?? 0,
          now: carry.now,
        })
  carry.commit()
  return {
    // The schema asks for jwt, introspection or both, so one of the two is there.
    verifier:
      introspector === undefined
        ? (jwt as Verifier)
        : withIntrospection(jwt, introspector, maxTokenBytes),
    servers,
    rootMetadata: metadataFor(
      resourceUrl(base),
      authServers,
      unique([...allRequired, ...advertised]),
    ),
    prefix: base.prefix,
  }
}

/** Auth problems the schema cannot see, for the config loader's cross-check. */
export function checkAuthConfig(config: GatewayConfig, configDir: string): string[] {
  const problems: string[] = []
  const auth = config.auth
  if (auth !== undefined) {
    const u = new URL(auth.publicUrl)
    if (u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
      problems.push('auth.publicUrl: no query, fragment or userinfo allowed')
    }
    const j = auth.jwt
    const files = [j?.jwksFile, j?.publicKeyFile].filter((f) => f !== undefined)
    if (
      j !== undefined &&
      files.every((f) => existsSync(isAbsolute(f) ? f : resolve(configDir, f)))
    ) {
      problems.push(...checkKeyFiles(j, configDir))
    }
    const i = auth.introspection
    // An answer without `iss` is taken for this issuer; without one no iss is known at all.
    if (i !== undefined && j === undefined && i.issuer === undefined)
      problems.push('auth.introspection.issuer: needed without auth.jwt')
    if (
      i !== undefined &&
      i.url === undefined &&
      i.issuer === undefined &&
      typeof j?.issuer !== 'string'
    )
      problems.push('auth.introspection.url: set it, or an issuer to discover it from')
  }
  const ut = config.userTokens
  if (ut?.redis === 'cache' && config.cache?.redis === undefined)
    problems.push('userTokens.redis: "cache" needs cache.redis to be set')
  // Each worker process would hold its own memory store: a user connected through one would be
  // asked again by the others (docs/auth.md §Per-user credentials).
  if (ut !== undefined && ut.redis === undefined && config.workers !== 1)
    problems.push('userTokens.redis: needed with workers (the memory store is per process)')
  for (const [name, s] of Object.entries(config.servers)) {
    // Scopes and client ids are read from a verified token; without auth there is none.
    if (auth === undefined && Object.keys(s.scopes).length > 0) {
      problems.push(`servers.${name}.scopes: needs auth to be configured`)
    }
    if (auth === undefined && s.clients !== undefined) {
      problems.push(`servers.${name}.clients: needs auth to be configured`)
    }
    problems.push(...userAuthProblems(config, name, s))
    if (s.tokenExchange === undefined) continue
    if (auth === undefined) {
      problems.push(`servers.${name}.tokenExchange: needs auth to be configured`)
    }
    if (Object.keys(s.headers).some((h) => h.toLowerCase() === 'authorization')) {
      problems.push(`servers.${name}.headers.Authorization: conflicts with tokenExchange`)
    }
  }
  return problems
}

/**
 * `userAuth` needs verified callers to store tokens for (docs/auth.md §Per-user credentials) and a
 * key to store them with; the user's token replaces the caller's, so it excludes the other ways a
 * server gets an `Authorization`.
 */
function userAuthProblems(config: GatewayConfig, name: string, s: ServerConfig): string[] {
  if (s.userAuth === undefined) return []
  const at = `servers.${name}.userAuth`
  const problems: string[] = []
  // The connect page signs the user in at the issuer of their JWT (userauth/login.ts).
  if (config.auth?.jwt === undefined)
    problems.push(`${at}: needs auth.jwt (tokens are kept per user, signed in at its issuer)`)
  if (config.userTokens === undefined) problems.push(`${at}: needs userTokens.key`)
  if (s.tokenExchange !== undefined) problems.push(`${at}: conflicts with tokenExchange`)
  if (Object.keys(s.headers).some((h) => h.toLowerCase() === 'authorization'))
    problems.push(`servers.${name}.headers.Authorization: conflicts with userAuth`)
  return problems
}

/**
 * Every scope a call to this server may need: `requiredScopes`, then those of `scopes:` in config
 * order (docs/auth.md §Scopes per tool), for RFC 9728 `scopes_supported`.
 */
function scopesOf(s: ServerConfig): string[] {
  const { tools, prompts, resources } = s.scopes
  const perTarget = [tools, prompts, resources].flatMap((t) => Object.values(t ?? {}).flat())
  return unique([...s.requiredScopes, ...perTarget])
}

/** The `iss` values accepted: `auth.jwt.issuer` (one or a list), and `introspection.issuer`. */
function acceptedIssuers(auth: NonNullable<GatewayConfig['auth']>): string[] {
  const jwt = auth.jwt?.issuer
  const own = jwt === undefined ? [] : typeof jwt === 'string' ? [jwt] : jwt
  const introspected = auth.introspection?.issuer
  return unique(introspected === undefined ? own : [...own, introspected])
}

function unique(xs: readonly string[]): string[] {
  return [...new Set(xs)]
}
