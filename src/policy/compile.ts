import { createHash } from 'node:crypto'
import type { PolicyCaller } from '../match/claims.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import { compileWhen } from '../match/when.js'
import { compileCondition, type CompiledCondition } from './condition.js'
import type { RuleConfig, TargetPatterns } from './schema.js'

/** What a request can name: the kinds of target policy decides on. */
export type TargetKind = 'tool' | 'prompt' | 'resource' | 'event' | 'method'

/** A rule as parsed from a file, with where it came from (`policies/a.yaml rules[2]`). */
export interface SourcedRule {
  readonly rule: RuleConfig
  readonly source: string
}

/** A rule compiled once: matchers and a `when` predicate, so nothing is parsed per request. */
export interface CompiledRule {
  /** `name#<hash of the rule's content>`: changes whenever the rule does (cache keys use it). */
  readonly id: string
  readonly name: string
  readonly source: string
  readonly servers: Matcher
  /** Undefined: the rule applies to every caller, anonymous ones included. */
  readonly when: ((caller: PolicyCaller | undefined) => boolean) | undefined
  readonly allow: Readonly<Record<TargetKind, Matcher>>
  readonly deny: Readonly<Record<TargetKind, Matcher>>
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
    when: rule.when === undefined ? undefined : compileWhen(rule.when),
    allow: compileTargets(rule.allow),
    deny: compileTargets(rule.deny),
    dryRun: rule.mode === 'dry-run',
    condition:
      rule.if !== undefined
        ? compileCondition(rule.if, 'if')
        : rule.unless !== undefined
          ? compileCondition(rule.unless, 'unless')
          : undefined,
  }
}

function compileTargets(t: TargetPatterns | undefined): Record<TargetKind, Matcher> {
  return {
    tool: compilePatterns(t?.tools),
    prompt: compilePatterns(t?.prompts),
    resource: compilePatterns(t?.resources),
    event: compilePatterns(t?.events),
    method: compilePatterns(t?.methods),
  }
}
