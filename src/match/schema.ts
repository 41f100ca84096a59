import { z } from 'zod'

/**
 * The config syntax of name patterns, claim and client conditions (match/pattern.ts,
 * match/claims.ts, match/clients.ts).
 */

export const pattern = z.string().min(1, 'a pattern cannot be empty')
export const patterns = z.array(pattern)

/** A claim matches when it equals the value, or is an array that contains it (strict equality). */
const claimValue = z.union([z.string(), z.number(), z.boolean()])

const claims = z
  .record(z.string().min(1), claimValue)
  .refine((c) => Object.keys(c).length > 0, 'name at least one claim')

/** A rate limit's `when` (docs/rate-limits.md): claims only. */
export const when = z.strictObject({ claims })

/**
 * A policy rule's `when` (docs/policy.md): claims, client applications (patterns over the token's
 * `azp`, else `client_id`), or both; every condition named must hold.
 */
export const ruleWhen = z
  .strictObject({
    claims: claims.optional(),
    clients: patterns.min(1, 'name at least one client').optional(),
  })
  .refine((w) => w.claims !== undefined || w.clients !== undefined, 'name claims or clients')

export type RuleWhen = z.infer<typeof ruleWhen>
