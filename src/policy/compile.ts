import { createHash } from 'node:crypto'
import type { PolicyCaller } from '../match/claims.js'
import { compilePatterns, type Matcher } from '../match/pattern.js'
import type { RuleWhen } from '../match/schema.js'
import { compileWhen } from '../match/when.js'
import { compileCondition, type CompiledCondition } from './condition.js'
import { filePattern, type FiledPattern } from './pattern-index.js'
import type { RuleConfig, TargetPatterns } from './schema.js'

/** What a request can name: the kinds of target policy decides on. */
export type TargetKind = 'tool' | 'prompt' | 'resource' | 'event' | 'skill' | 'method'

/** The patterns of one side of a rule (`allow` or `deny`) by kind; a kind not listed is absent. */
type RuleTargets = Readonly<Partial<Record<TargetKind, readonly string[]>>>

/** The same patterns worked out for the policy's index (pattern-index.ts), each with its kind. */
type FiledTargets = readonly FiledPattern<TargetKind>[]

/** A rule as parsed from a file, with where it came from (`policies/a.yaml rules[2]`). */
export interface SourcedRule {
  readonly rule: RuleConfig
  readonly source: string
  /**
   * The compiled rule's id (CompiledRule.id), when the reader has it already: a reload's reader
   * checks every rule (checkRule), and the serving thread does not hash the rule again.
   */
  readonly id?: string
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
  /**
   * `allow`, `deny` and the client patterns of `when` as the index files them: worked out with
   * the rule, so an index built again for a reload that kept it makes only its own entries
   * (docs/policy.md §What a rule costs). Flat lists, shared where empty: they are held per rule.
   */
  readonly filedAllow: FiledTargets
  readonly filedDeny: FiledTargets
  readonly filedClients: readonly FiledPattern[]
  readonly dryRun: boolean
  /** `if` or `unless` (docs/policy.md §Conditions); undefined: decided on names alone. */
  readonly condition: CompiledCondition | undefined
}

/**
 * What the rules of one policy share once compiled (docs/policy.md §What a rule costs): one copy
 * of each claim value and client pattern, and one matcher and pattern list per distinct `servers`.
 * Thousands of rules naming the same few servers and teams then keep one of each, not one per
 * rule.
 */
export class RuleMemo {
  private readonly strings = new Map<string, string>()
  private readonly serverLists = new Map<string, { matcher: Matcher; patterns: string[] }>()
  private readonly filedPatterns = new Map<string, FiledPattern<TargetKind | ''>>()

  /** `text` as the one copy every rule shares (and its own, as `own` makes it). */
  shared(text: string): string {
    let one = this.strings.get(text)
    if (one === undefined) this.strings.set((one = own(text)), one)
    return one
  }

  /** `when` holding shared strings: teams and client ids recur across a policy's rules. */
  when(when: RuleWhen): RuleWhen {
    const value = (v: string | number | boolean): string | number | boolean =>
      typeof v === 'string' ? this.shared(v) : v
    return {
      ...(when.claims && {
        // fromEntries defines own properties, so a claim named `__proto__` stays a claim.
        claims: Object.fromEntries(Object.entries(when.claims).map(([k, v]) => [k, value(v)])),
      }),
      ...(when.clients && { clients: when.clients.map((c) => this.shared(c)) }),
    }
  }

  /** `pattern` of `kind` worked out for the index, shared by every rule naming it. */
  filed<K extends TargetKind | ''>(kind: K, pattern: string): FiledPattern<K> {
    const key = `${kind} ${pattern}`
    let one = this.filedPatterns.get(key)
    if (one === undefined) this.filedPatterns.set(key, (one = filePattern(kind, pattern)))
    return one as FiledPattern<K>
  }

  /** `patterns` and their matcher, shared by every rule with an equal list. */
  servers(patterns: readonly string[]): { matcher: Matcher; patterns: readonly string[] } {
    const key = JSON.stringify(patterns)
    let list = this.serverLists.get(key)
    if (list === undefined) {
      const kept = patterns.map((p) => this.shared(p))
      list = { matcher: compilePatterns(kept), patterns: kept }
      this.serverLists.set(key, list)
    }
    return list
  }
}

/**
 * Compiles one validated rule; a condition that does not compile throws ConditionSyntaxError.
 * Rules of one policy compiled with one `memo` share what they can (RuleMemo).
 */
export function compileRule(
  { rule, source, id }: SourcedRule,
  memo: RuleMemo = new RuleMemo(),
): CompiledRule {
  const servers = memo.servers(rule.servers)
  const when = rule.when === undefined ? undefined : memo.when(rule.when)
  const allow = targetsOf(rule.allow)
  const deny = targetsOf(rule.deny)
  return {
    // A string the reader sent is already one of its own (a copy, sharing nothing).
    id: id ?? own(ruleId(rule)),
    name: own(rule.name),
    source: own(source),
    servers: servers.matcher,
    serverPatterns: servers.patterns,
    when: when === undefined ? undefined : compileWhen(when),
    whenSpec: when,
    allow,
    deny,
    filedAllow: filedOf(allow, memo),
    filedDeny: filedOf(deny, memo),
    filedClients: when?.clients?.map((c) => memo.filed('', c)) ?? NO_CLIENTS,
    dryRun: rule.mode === 'dry-run',
    condition: conditionOf(rule),
  }
}

/**
 * `rule`, compiled from the same rule as written, as compileRule makes it for `source`: the
 * source is the one field compileRule reads it for. A reload whose edit moved a rule (one added
 * before it) takes the running rule so, rather than compiling it again (policy/off-thread.ts).
 */
export function movedRule(rule: CompiledRule, source: string): CompiledRule {
  return { ...rule, source: own(source) }
}

/**
 * What the reload's reader makes of a rule (policy-reader.ts): its id, and the one part of
 * compiling that refuses a valid rule, its condition (ConditionSyntaxError). The serving thread
 * compiles the rest when it takes the rule in (compileRule), and the reader's copies of matchers
 * and closures, which it could not send, are not made.
 */
export function checkRule({ rule }: SourcedRule): { readonly id: string } {
  conditionOf(rule)
  return { id: ruleId(rule) }
}

/** `if` or `unless` compiled; undefined without either. */
function conditionOf(rule: RuleConfig): CompiledCondition | undefined {
  if (rule.if !== undefined) return compileCondition(rule.if, 'if')
  if (rule.unless !== undefined) return compileCondition(rule.unless, 'unless')
  return undefined
}

/** `name#<hash>`: CompiledRule.id. */
function ruleId(rule: RuleConfig): string {
  const hash = createHash('sha256').update(JSON.stringify(rule)).digest('hex').slice(0, 12)
  return `${rule.name}#${hash}`
}

/** A side with no patterns (most rules have no `deny`): one object for every rule. */
const NO_TARGETS: RuleTargets = Object.freeze({})

function targetsOf(t: TargetPatterns | undefined): RuleTargets {
  if (t === undefined) return NO_TARGETS
  const kept = (patterns: readonly string[]): readonly string[] => patterns.map(own)
  return {
    ...(t.tools && { tool: kept(t.tools) }),
    ...(t.prompts && { prompt: kept(t.prompts) }),
    ...(t.resources && { resource: kept(t.resources) }),
    ...(t.events && { event: kept(t.events) }),
    ...(t.skills && { skill: kept(t.skills) }),
    ...(t.methods && { method: kept(t.methods) }),
  }
}

const NOT_FILED: FiledTargets = Object.freeze([])
const NO_CLIENTS: readonly FiledPattern[] = Object.freeze([])

function filedOf(targets: RuleTargets, memo: RuleMemo): FiledTargets {
  if (targets === NO_TARGETS) return NOT_FILED
  return (Object.entries(targets) as [TargetKind, readonly string[]][]).flatMap(
    ([kind, patterns]) => patterns.map((p) => memo.filed(kind, p)),
  )
}

/**
 * `text` as a string of its own: a parser's substring (a pattern read from a file) keeps the whole
 * file text in memory for as long as the rule lives, and a built string (`<file> rules[3]`) keeps
 * its pieces. V8 copies substrings and joins shorter than 13 characters outright, so only longer
 * ones are copied here; JSON.parse builds a new flat string sharing nothing with its input.
 */
function own(text: string): string {
  return text.length < 13 ? text : (JSON.parse(JSON.stringify(text)) as string)
}
