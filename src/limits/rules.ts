import { createHash } from 'node:crypto'
import type { McpTarget } from '../mcp/classify.js'
import { compileClaims, type PolicyCaller } from '../match/claims.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import type { LimitConfig } from './schema.js'

/** Whose bucket a request counts against (docs/rate-limits.md §Keys). */
export type LimitKey =
  | { readonly from: 'claim'; readonly name: string }
  | { readonly from: 'header'; readonly name: string }
  | { readonly from: 'ip' }
  | { readonly from: 'none' }

/** `rate: N/unit` + `burst`, as numbers. */
export interface RateSpec {
  readonly count: number
  readonly periodMs: number
  readonly burst: number
}

/** A `limits:` entry compiled once: matchers, key and rate or concurrency. */
export interface CompiledLimit {
  /** `name#<hash of the entry>`: state keys use it, so an edited limit starts from fresh buckets. */
  readonly id: string
  readonly name: string
  readonly source: string
  readonly servers: Matcher
  readonly when: ((caller: PolicyCaller | undefined) => boolean) | undefined
  readonly methods: Matcher
  readonly tools: Matcher
  readonly prompts: Matcher
  readonly resources: Matcher
  readonly events: Matcher
  readonly key: LimitKey
  readonly rate: RateSpec | undefined
  readonly concurrency: number | undefined
  /** The entry as written, for the status page's configuration (docs/operations.md). */
  readonly config: LimitConfig
}

/** A limit entry as parsed from a file, with where it came from. */
export interface SourcedLimit {
  readonly limit: LimitConfig
  readonly source: string
}

const PERIOD_MS: Readonly<Record<string, number>> = {
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
}

/** `120/minute` → count and period; the schema has already checked the shape. */
function parseRate(text: string): { count: number; periodMs: number } {
  const [count, unit] = text.split('/') as [string, string]
  return { count: Number(count), periodMs: PERIOD_MS[unit] as number }
}

function parseKey(text: string): LimitKey {
  if (text === 'ip') return { from: 'ip' }
  if (text === 'none') return { from: 'none' }
  const colon = text.indexOf(':')
  const from = text.slice(0, colon)
  const name = text.slice(colon + 1)
  // Node lower-cases incoming header names; claims are case-sensitive JSON keys.
  return from === 'header' ? { from: 'header', name: name.toLowerCase() } : { from: 'claim', name }
}

export function compileLimit({ limit, source }: SourcedLimit): CompiledLimit {
  const hash = createHash('sha256').update(JSON.stringify(limit)).digest('hex').slice(0, 12)
  const rate = limit.rate === undefined ? undefined : parseRate(limit.rate)
  return {
    id: `${limit.name}#${hash}`,
    name: limit.name,
    source,
    servers: compilePatterns(limit.servers),
    when: limit.when === undefined ? undefined : compileClaims(limit.when.claims),
    methods: compilePatterns(limit.methods),
    tools: compilePatterns(limit.tools),
    prompts: compilePatterns(limit.prompts),
    resources: compilePatterns(limit.resources),
    events: compilePatterns(limit.events),
    key: parseKey(limit.key),
    // Without `burst`, a whole period's worth may pass at once (a plain "N per period" limit).
    rate: rate === undefined ? undefined : { ...rate, burst: limit.burst ?? rate.count },
    concurrency: limit.concurrency,
    config: limit,
  }
}

/**
 * Whether a limit counts this request: its method matches `methods`, or a target it names matches
 * `tools` / `prompts` / `resources` / `events`. Targets are the judged ones (classify and authorize
 * stages).
 */
export function limitApplies(
  limit: CompiledLimit,
  caller: PolicyCaller | undefined,
  method: string | undefined,
  targets: readonly McpTarget[],
): boolean {
  if (limit.when !== undefined && !limit.when(caller)) return false
  if (method !== undefined && limit.methods(method)) return true
  for (const t of targets) {
    if (
      t.kind === 'tool'
        ? limit.tools(t.name)
        : t.kind === 'prompt'
          ? limit.prompts(t.name)
          : t.kind === 'resource'
            ? limit.resources(t.uri)
            : t.kind === 'event' && limit.events(t.name)
    )
      return true
  }
  return false
}
