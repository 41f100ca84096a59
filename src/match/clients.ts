import type { PolicyCaller } from './claims.js'
import { compilePatterns } from './pattern.js'

/**
 * Client applications: the OAuth client a token was issued to, for `when.clients` in policy rules
 * and `servers.<name>.clients` (docs/auth.md §Client applications, docs/policy.md).
 */

/**
 * The client id of a verified token: `azp` (OIDC Core §2, the authorized party) when the token
 * has one, else `client_id` (RFC 9068 §2.2, RFC 8693 §4.3); undefined when the deciding claim is
 * not a non-empty string (docs/auth.md §Client applications). Presence decides, not the value:
 * a present `azp` of any other JSON type (`null` included, which `??` would skip) names no
 * client and never falls back to `client_id`, so a token that says two things never reads as the
 * friendlier one. The empty string is no client either: `clients: ["*"]` means "some client".
 */
export function clientIdOf(caller: PolicyCaller | undefined): string | undefined {
  if (caller === undefined) return undefined
  const claims = caller.claims
  // SECURITY: own claims only, so `constructor` or `__proto__` never read inherited values.
  // SECURITY: the first claim present decides, whatever its value (`azp: null` stays azp's).
  const name = Object.hasOwn(claims, 'azp') ? 'azp' : 'client_id'
  const id = Object.hasOwn(claims, name) ? claims[name] : undefined
  return typeof id === 'string' && id !== '' ? id : undefined
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
