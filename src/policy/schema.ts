import { z } from 'zod'

/**
 * The policy file format: YAML files in the `policies:` folder, each `{ rules: [...] }`. Strict:
 * an unknown key is an error that names its file and path, so a typo (`alow:`) can never turn
 * into a rule that silently says nothing.
 */

const pattern = z.string().min(1, 'a pattern cannot be empty')
const patterns = z.array(pattern)

const targets = z.strictObject({
  tools: patterns.optional(),
  prompts: patterns.optional(),
  resources: patterns.optional(),
  /** Methods a server lists under `extraMethods` (the protocol's own methods are not targets). */
  methods: patterns.optional(),
})

/** A claim matches when it equals the value, or is an array that contains it (strict equality). */
const claimValue = z.union([z.string(), z.number(), z.boolean()])

const when = z.strictObject({
  claims: z
    .record(z.string().min(1), claimValue)
    .refine((c) => Object.keys(c).length > 0, 'name at least one claim'),
})

const rule = z
  .strictObject({
    name: z.string().min(1),
    description: z.string().optional(),
    /** Server names or patterns (`"*"` = every server). */
    servers: z.array(pattern).min(1),
    when: when.optional(),
    allow: targets.optional(),
    deny: targets.optional(),
    /** `dry-run`: evaluated and audited as "would deny", never blocks. */
    mode: z.enum(['enforce', 'dry-run']).optional(),
  })
  .refine((r) => r.allow !== undefined || r.deny !== undefined, 'a rule needs allow or deny')

/** `claim:<name>`, `header:<Name>` (an RFC 9110 token), `ip` or `none`. */
const limitKey = z
  .string()
  .regex(
    /^(claim:.+|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+|ip|none)$/,
    'expected "claim:<name>", "header:<Name>", "ip" or "none"',
  )

/** A rate limit or concurrency limit (docs/rate-limits.md). */
const limit = z
  .strictObject({
    /** Goes into metrics labels and RateLimit headers (an sf-string), so it is kept plain. */
    name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'limit names are [A-Za-z0-9._-], 1-64'),
    description: z.string().optional(),
    servers: z.array(pattern).min(1),
    when: when.optional(),
    tools: patterns.optional(),
    prompts: patterns.optional(),
    resources: patterns.optional(),
    /** Any JSON-RPC method (`tools/list`, `*`), including the ones that name targets. */
    methods: patterns.optional(),
    key: limitKey,
    rate: z
      .string()
      .regex(/^[1-9][0-9]{0,8}\/(second|minute|hour|day)$/, 'expected "<N>/second|minute|hour|day"')
      .optional(),
    burst: z.int().min(1).max(1_000_000_000).optional(),
    concurrency: z.int().min(1).max(1_000_000).optional(),
  })
  .refine(
    (l) => (l.rate === undefined) !== (l.concurrency === undefined),
    'a limit needs exactly one of rate or concurrency',
  )
  .refine((l) => l.burst === undefined || l.rate !== undefined, 'burst needs rate')
  .refine(
    (l) => [l.tools, l.prompts, l.resources, l.methods].some((p) => p !== undefined),
    'name what the limit counts: tools, prompts, resources or methods',
  )

export const policyFileSchema = z
  .strictObject({ rules: z.array(rule).optional(), limits: z.array(limit).optional() })
  .refine((f) => f.rules !== undefined || f.limits !== undefined, 'expected rules or limits')

export type RuleConfig = z.infer<typeof rule>
export type LimitConfig = z.infer<typeof limit>
export type TargetPatterns = z.infer<typeof targets>

/** `rules[0].allow.tools[1]: expected string`, the same shape as config errors. */
export function formatPolicyIssue(issue: z.core.$ZodIssue): string[] {
  let path = ''
  for (const p of issue.path) {
    if (typeof p === 'number') path += `[${p}]`
    else path += path ? `.${String(p)}` : String(p)
  }
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((k) => `${path ? `${path}.` : ''}${k}: unknown key`)
  }
  return [`${path || '(root)'}: ${issue.message}`]
}
