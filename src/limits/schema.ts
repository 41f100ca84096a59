import { z } from 'zod'
import { pattern, patterns, when } from '../match/schema.js'

/** `claim:<name>`, `header:<Name>` (an RFC 9110 token), `ip` or `none`. */
const limitKey = z
  .string()
  .regex(
    /^(claim:.+|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+|ip|none)$/,
    'expected "claim:<name>", "header:<Name>", "ip" or "none"',
  )

/** A rate limit or concurrency limit (docs/rate-limits.md). */
export const limitSchema = z
  .strictObject({
    /** Goes into metrics labels and RateLimit headers (an sf-string), so it is kept plain. */
    name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'limit names are [A-Za-z0-9._-], 1-64'),
    description: z.string().optional(),
    servers: z.array(pattern).min(1),
    when: when.optional(),
    tools: patterns.optional(),
    prompts: patterns.optional(),
    resources: patterns.optional(),
    /** Event types of the events extension (docs/events.md), by the name a request names. */
    events: patterns.optional(),
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
    (l) => [l.tools, l.prompts, l.resources, l.events, l.methods].some((p) => p !== undefined),
    'name what the limit counts: tools, prompts, resources, events or methods',
  )

export type LimitConfig = z.infer<typeof limitSchema>
