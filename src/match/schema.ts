import { z } from 'zod'

/** The config syntax of name patterns and claim conditions (match/pattern.ts, match/claims.ts). */

export const pattern = z.string().min(1, 'a pattern cannot be empty')
export const patterns = z.array(pattern)

/** A claim matches when it equals the value, or is an array that contains it (strict equality). */
const claimValue = z.union([z.string(), z.number(), z.boolean()])

export const when = z.strictObject({
  claims: z
    .record(z.string().min(1), claimValue)
    .refine((c) => Object.keys(c).length > 0, 'name at least one claim'),
})
