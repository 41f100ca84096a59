/**
 * Matching a verified caller's claims, exactly: for policy rules (`when.claims`) and rate-limit
 * keys alike (docs/policy.md, docs/rate-limits.md).
 */

/** The caller as policy and limits see it; the auth stage's Principal fits (hono-free). */
export interface PolicyCaller {
  readonly subject: string
  readonly issuer: string
  readonly claims: Readonly<Record<string, unknown>>
}

/**
 * Every listed claim must equal the value or, when the claim is an array, contain it. Strict
 * equality: `1` never matches `"1"`. Without a verified caller nothing matches.
 */
export function compileClaims(
  claims: Readonly<Record<string, string | number | boolean>>,
): (caller: PolicyCaller | undefined) => boolean {
  const wanted = Object.entries(claims)
  // One claim, the usual rule (`groups: team-a`): a closure over the name and value alone, with
  // no array of entries kept per rule (docs/policy.md §What a rule costs). Built in a function of
  // its own, so its context does not hold `wanted` as well.
  if (wanted.length === 1) return oneClaim(...(wanted[0] as [string, string | number | boolean]))
  return (caller) =>
    caller !== undefined && wanted.every(([name, value]) => holds(caller, name, value))
}

function oneClaim(
  name: string,
  value: string | number | boolean,
): (caller: PolicyCaller | undefined) => boolean {
  return (caller) => caller !== undefined && holds(caller, name, value)
}

function holds(caller: PolicyCaller, name: string, value: string | number | boolean): boolean {
  // SECURITY: own claims only, so `constructor` or `__proto__` never match inherited values.
  if (!Object.hasOwn(caller.claims, name)) return false
  const actual = caller.claims[name]
  return actual === value || (Array.isArray(actual) && actual.includes(value))
}
