import { createHash } from 'node:crypto'
import type { PolicyCaller } from '../match/claims.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import type { RuleWhen } from '../match/schema.js'
import { compileWhen } from '../match/when.js'
import { compileCondition, type CompiledCondition } from './condition.js'
import type { RuleConfig, TargetPatterns } from './schema.js'

/** What a request can name: the kinds of target policy decides on. */
export type TargetKind = 'tool' | 'prompt' | 'resource' | 'event' | 'skill' | 'method'

/** The patterns of one side of a rule (`allow` or `deny`) by kind; a kind not listed is absent. */
type RuleTargets = Readonly<Partial<Record<TargetKind, readonly string[]>>>

/** A rule as parsed from a file, with where it came from (`policies/a.yaml rules[2]`). */
export interface SourcedRule {
  readonly rule: RuleConfig
  readonly source: string
}

/**
 * A rule compiled once, so nothing is parsed per request. Its patterns stay as written: the
 * policy's index (rule-index.ts) files them by server, kind and name, and matches them with
 * match/pattern.ts.
 */
export interface CompiledRule {
  /** `name#<hash of the rule's content>`: changes whenever the rule does (cache keys use it). */
  readonly id: string
  readonly name: string
  readonly source: string
  readonly servers: Matcher
  /** `servers` as written: a rule naming servers only literally is indexed under each. */
  readonly serverPatterns: readonly string[]
  /** Undefined: the rule applies to every caller, anonymous ones included. */
  readonly when: ((caller: PolicyCaller | undefined) => boolean) | undefined
  /** `when` as written: the caller index finds the rule by its first claim or its clients. */
  readonly whenSpec: RuleWhen | undefined
  readonly allow: RuleTargets
  readonly deny: RuleTargets
  readonly dryRun: boolean
  /** `if` or `unless` (docs/policy.md §Conditions); undefined: decided on names alone. */
  readonly condition: CompiledCondition | undefined
}

/** Compiles one validated rule; a condition that does not compile throws ConditionSyntaxError. */
export function compileRule({ rule, source }: SourcedRule): CompiledRule {
  const hash = createHash('sha256').update(JSON.stringify(rule)).digest('hex').slice(0, 12)
  return {
    id: `${rule.name}#${hash}`,
    name: rule.name,
    source,
    servers: compilePatterns(rule.servers),
    serverPatterns: rule.servers,
    when: rule.when === undefined ? undefined : compileWhen(rule.when),
    whenSpec: rule.when,
    allow: targetsOf(rule.allow),
    deny: targetsOf(rule.deny),
    dryRun: rule.mode === 'dry-run',
    condition:
      rule.if !== undefined
        ? compileCondition(rule.if, 'if')
        : rule.unless !== undefined
          ? compileCondition(rule.unless, 'unless')
          : undefined,
  }
}

function targetsOf(t: TargetPatterns | undefined): RuleTargets {
  if (t === undefined) return {}
  return {
    ...(t.tools && { tool: t.tools }),
    ...(t.prompts && { prompt: t.prompts }),
    ...(t.resources && { resource: t.resources }),
    ...(t.events && { event: t.events }),
    ...(t.skills && { skill: t.skills }),
    ...(t.methods && { method: t.methods }),
  }
}
