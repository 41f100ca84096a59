import { z } from 'zod'
import { limitSchema } from '../limits/schema.js'
import { pattern, patterns, ruleWhen } from '../match/schema.js'

/**
 * The policy file format: YAML files in the `policies:` folder, each `{ rules: [...] }`. Strict:
 * an unknown key is an error that names its file and path, so a typo (`alow:`) can never turn
 * into a rule that silently says nothing.
 */

const targets = z.strictObject({
  tools: patterns.optional(),
  prompts: patterns.optional(),
  resources: patterns.optional(),
  /** Event types of the events extension (docs/events.md), by `params.name`. */
  events: patterns.optional(),
  /** Skills of the skills extension, by the URI of their SKILL.md (docs/policy.md §Skills). */
  skills: patterns.optional(),
  /** Methods a server lists under `extraMethods` (the protocol's own methods are not targets). */
  methods: patterns.optional(),
})

const rule = z
  .strictObject({
    name: z.string().min(1),
    description: z.string().optional(),
    /** Server names or patterns (`"*"` = every server). */
    servers: z.array(pattern).min(1),
    /** Who the rule is for: claims and client applications (docs/policy.md). */
    when: ruleWhen.optional(),
    allow: targets.optional(),
    deny: targets.optional(),
    /** `dry-run`: evaluated and audited as "would deny", never blocks. */
    mode: z.enum(['enforce', 'dry-run']).optional(),
    /** CEL over the call: the rule applies only when true (docs/policy.md §Conditions). */
    if: z.string().min(1).optional(),
    /** CEL over the call: the rule applies only when false. */
    unless: z.string().min(1).optional(),
  })
  .refine((r) => r.allow !== undefined || r.deny !== undefined, 'a rule needs allow or deny')
  .refine((r) => r.if === undefined || r.unless === undefined, {
    message: 'a rule has if or unless, not both (write one condition)',
    path: ['unless'],
  })

export const policyFileSchema = z
  .strictObject({ rules: z.array(rule).optional(), limits: z.array(limitSchema).optional() })
  .refine((f) => f.rules !== undefined || f.limits !== undefined, 'expected rules or limits')

export type PolicyFile = z.infer<typeof policyFileSchema>
export type RuleConfig = z.infer<typeof rule>
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
