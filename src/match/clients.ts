import type { PolicyCaller } from './claims.js'
import { compilePatterns } from './pattern.js'

/**
 * Client applications: the OAuth client a token was issued to, for `when.clients` in policy rules
 * and `servers.<name>.clients` (docs/auth.md §Client applications, docs/policy.md).
 */

/**
 * The client id of a verified token: `azp` (OIDC Core §2, the authorized party) when the token
 * has one, else `client_id` (RFC 9068 §2.2, RFC 8693 §4.3); a string, or undefined. A present
 * `azp` decides even when it is not a string, as in the cache's authorization context
 * (cache/key.ts), so a token that says two things never reads as the friendlier one.
 */
export function clientIdOf(caller: PolicyCaller | undefined): string | undefined {
  if (caller === undefined) return undefined
  const claims = caller.claims
  // SECURITY: own claims only, so `constructor` or `__proto__` never read inherited values.
  const azp = Object.hasOwn(claims, 'azp') ? claims['azp'] : undefined
  const id = azp ?? (Object.hasOwn(claims, 'client_id') ? claims['client_id'] : undefined)
  return typeof id === 'string' ? id : undefined
}

/**
 * Matches the caller's client id against patterns, exactly (match/pattern.ts). Without a
 * verified caller, or a token that names no client, nothing matches.
 */
export function compileClients(
  patterns: readonly string[],
): (caller: PolicyCaller | undefined) => boolean {
  const matcher = compilePatterns(patterns)
  return (caller) => {
    const id = clientIdOf(caller)
    return id !== undefined && matcher(id)
  }
}

/** The client allowlists of the endpoints that have one: by endpoint name. */
export type ClientGates = ReadonlyMap<string, (caller: PolicyCaller | undefined) => boolean>

/** Just the parts of a config the allowlists read. */
interface ClientsConfig {
  readonly servers: Readonly<Record<string, { readonly clients?: readonly string[] | undefined }>>
  readonly virtualServers: Readonly<Record<string, { readonly members: readonly string[] }>>
}

/**
 * `servers.<name>.clients`, compiled once per config. A virtual server's endpoint reaches every
 * member, so a token must pass every member's list there (as its scopes, auth/compile.ts).
 */
export function compileClientGates(config: ClientsConfig): ClientGates {
  const gates = new Map<string, (caller: PolicyCaller | undefined) => boolean>()
  for (const [name, s] of Object.entries(config.servers)) {
    if (s.clients !== undefined) gates.set(name, compileClients(s.clients))
  }
  for (const [name, v] of Object.entries(config.virtualServers)) {
    const lists = v.members.flatMap((m) => gates.get(m) ?? [])
    if (lists.length > 0) gates.set(name, (caller) => lists.every((allows) => allows(caller)))
  }
  return gates
}
