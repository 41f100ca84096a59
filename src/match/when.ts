import { compileClaims, type PolicyCaller } from './claims.js'
import { compileClients } from './clients.js'
import type { RuleWhen } from './schema.js'

/**
 * A policy rule's `when`, compiled once: every condition it names must hold (claims exactly,
 * match/claims.ts; the client application, match/clients.ts). Without a verified caller nothing
 * matches, so a rule with `when` never applies to an anonymous caller.
 */
export function compileWhen(when: RuleWhen): (caller: PolicyCaller | undefined) => boolean {
  const claims = when.claims === undefined ? undefined : compileClaims(when.claims)
  const clients = when.clients === undefined ? undefined : compileClients(when.clients)
  if (clients === undefined) return claims ?? (() => false)
  if (claims === undefined) return clients
  return (caller) => claims(caller) && clients(caller)
}
