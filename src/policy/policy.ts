import { compileArgumentKeys, type ArgumentKeys } from '../mcp/argument-keys.js'
import type { McpTarget } from '../mcp/classify.js'
import type { ListFilter } from '../mcp/list-filter.js'
import type { CompiledLimit } from '../limits/rules.js'
import type { PolicyCaller } from '../match/claims.js'
import type { CompiledRule, TargetKind } from './compile.js'
import { conditionInput, type ConditionInput, type ConditionKind } from './condition.js'
import { RuleListFilter } from './list-view.js'
import { ascendingOnce, type PatternIndex } from './pattern-index.js'
import {
  digest,
  factsOf,
  indexRules,
  mergeAscending,
  rulesOf,
  type RuleGroup,
  type RuleIndex,
  type ServerFacts,
} from './rule-index.js'
import { reachOf, type Reach, type ReachKey } from './skill-reach.js'
import { whole } from './slices.js'

/** Why a decision came out the way it did. */
type DecisionReason = 'allow_rule' | 'deny_rule' | 'default_deny' | 'condition_error'

/** One condition evaluated for a decision: its rule, and its value or why it has none. */
export type ConditionResult = { readonly rule: string; readonly kind: ConditionKind } & (
  { readonly value: boolean } | { readonly error: string }
)

/** The outcome of checking one named target. */
export interface Decision {
  /** Whether the request may go on to the backend. */
  readonly allow: boolean
  /** The rule that decided; undefined when nothing allowed the target (default deny). */
  readonly rule: CompiledRule | undefined
  readonly reason: DecisionReason
  /** True when the policy denies but dry run (global or the deciding rule's) lets it through. */
  readonly dryRun: boolean
  /** Every condition evaluated, in rule order (docs/policy.md §Conditions); often empty. */
  readonly conditions: readonly ConditionResult[]
}

/** `enforce` blocks; `dry-run` evaluates and audits "would deny" but never blocks. */
export type PolicyMode = 'enforce' | 'dry-run'

interface Verdict {
  readonly allow: boolean
  readonly rule: CompiledRule | undefined
  readonly reason: DecisionReason
}

/** The conditions of one check: the call's input, converted once, and each rule's outcome. */
class Conditions {
  private input: ConditionInput | undefined
  readonly results = new Map<CompiledRule, ConditionResult>()

  constructor(private readonly read: () => ConditionInput) {}

  /** Whether `rule` applies to the call; 'error' when its condition has no value. */
  applies(rule: CompiledRule): boolean | 'error' {
    const condition = rule.condition
    if (condition === undefined) return true
    let result = this.results.get(rule)
    if (result === undefined) {
      this.input ??= this.read()
      const outcome = condition.evaluate(this.input)
      result = { rule: rule.name, kind: condition.kind, ...outcome }
      this.results.set(rule, result)
    }
    if ('error' in result) return 'error'
    return condition.kind === 'if' ? result.value : !result.value
  }
}

/** Lists are judged on names alone (arguments are unknown then): a condition never hides. */
const NAMES_ONLY = 'names-only'
const NO_CONDITIONS: readonly ConditionResult[] = Object.freeze([])

const DEFAULT_DENY: Verdict = { allow: false, rule: undefined, reason: 'default_deny' }
const NONE: readonly number[] = Object.freeze([])
const NO_RULES: ReadonlySet<CompiledRule> = new Set()

/**
 * The compiled org-wide allowlist. Semantics (docs/policy.md): what no rule allows is denied; a
 * matching deny wins over any allow; a rule without `when` applies to every caller. Immutable: a
 * reload builds a new set and swaps it in whole. Rules are indexed (rule-index.ts): a rule naming
 * only literal servers under each of them, the others together; a decision takes the rules whose
 * target patterns match the name from the server's group and the shared one, then judges just
 * those, in rule order, as docs/policy.md §Semantics says.
 */
export class PolicySet {
  private readonly own: ReadonlyMap<string, RuleGroup>
  private readonly shared: RuleGroup
  private readonly facts: ReadonlyMap<string, ServerFacts>
  /**
   * What a runtime compiles from this policy besides the policy itself (runtime/runtime.ts): the
   * limiter from `limits:`, and per server the body reading its conditions need. Two policies of
   * equal shape can be swapped under one runtime; otherwise a reload builds a new runtime.
   */
  readonly runtimeShape: string

  constructor(
    readonly rules: readonly CompiledRule[],
    readonly mode: PolicyMode,
    /** Hash of every rule and the mode; tells reloads apart in logs. */
    readonly id: string,
    servers: Iterable<string>,
    /** `limits:` entries of the same files, in file order (docs/rate-limits.md). */
    readonly limits: readonly CompiledLimit[] = [],
    /**
     * The index of `rules` (rule-index.ts), when it was made in slices beforehand (load.ts); a
     * reload beside this policy patches it.
     */
    readonly index: RuleIndex = whole(indexRules(rules, servers, limits)),
  ) {
    this.own = index.own
    this.shared = index.shared
    this.facts = index.facts
    this.runtimeShape = index.runtimeShape
  }

  /**
   * Decides whether `caller` may use `target` on `server` with `args`, the call's arguments
   * (judge.ts argumentsOf; undefined: none). Pure and synchronous.
   */
  check(
    caller: PolicyCaller | undefined,
    server: string,
    target: McpTarget,
    args?: unknown,
  ): Decision {
    const kind = target.kind
    const value = target.kind === 'resource' ? target.uri : target.name
    // A skill, or a resource that may be a skill's file, is decided by more than its own patterns
    // (policy/skill-reach.ts); every other target by its own alone, with no lookup more.
    const reach =
      kind === 'resource' || kind === 'skill'
        ? reachOf(target, this.hasSkillRules(server))
        : undefined
    const deny =
      reach === undefined
        ? this.applying('deny', server, kind, value, caller)
        : this.applyingAny('deny', server, reach.deny, caller)
    const allow =
      reach === undefined
        ? this.applying('allow', server, kind, value, caller)
        : this.applyingAny('allow', server, reach.allow, caller)
    // Without a conditional rule among them, judging by names is the whole check (and costs no
    // per-call state): NAMES_ONLY then decides exactly as the conditions would.
    const c =
      deny.some(hasCondition) || allow.some(hasCondition)
        ? new Conditions(() => conditionInput(caller, server, target, args))
        : NAMES_ONLY
    if (this.mode === 'dry-run') {
      const v = evaluate(deny, allow, c)
      return { ...v, allow: true, dryRun: !v.allow, conditions: resultsOf(c) }
    }
    if (!deny.some(isDryRun) && !allow.some(isDryRun))
      return { ...evaluate(deny, allow, c), dryRun: false, conditions: resultsOf(c) }
    const enforced = evaluate(deny.filter(isEnforced), allow.filter(isEnforced), c)
    if (!enforced.allow) return { ...enforced, dryRun: false, conditions: resultsOf(c) }
    // A dry-run rule never changes the outcome; it only says what it would have done.
    const full = evaluate(deny, allow, c)
    return full.allow
      ? { ...enforced, dryRun: false, conditions: resultsOf(c) }
      : { ...full, allow: true, dryRun: true, conditions: resultsOf(c) }
  }

  /** Whether some rule for `server` has a condition, so its calls' arguments must be read. */
  hasConditions(server: string): boolean {
    return this.factsOf(server).conditional
  }

  /**
   * The argument keys the conditions of `server`'s rules read (mcp/argument-keys.ts), undefined
   * when it has none: the strict scanner refuses keys other readers take for them. Compiled on
   * each call, which the runtime makes once per server and config.
   */
  argumentKeys(server: string): ArgumentKeys | undefined {
    const reads = this.rulesOf(server).flatMap((r) => (r.condition ? [r.condition.reads] : []))
    return compileArgumentKeys(reads)
  }

  /** The rules for `server` that apply to `caller` (`when` holds or is absent), in rule order. */
  rulesFor(caller: PolicyCaller | undefined, server: string): readonly CompiledRule[] {
    return this.rulesOf(server).filter((r) => appliesTo(r, caller))
  }

  /**
   * The caller's view of list results on `server`, consistent with check(): an item is listed
   * exactly when calling it would not be blocked. Undefined in global dry run (nothing is hidden).
   * Building it looks at the rules with `when` filed under the caller's claims and client; each
   * item then costs one lookup of its name.
   */
  listFilter(caller: PolicyCaller | undefined, server: string): ListFilter | undefined {
    if (this.mode === 'dry-run') return undefined
    const facts = this.factsOf(server)
    let key = facts.everyoneKey
    let chosen = NO_RULES
    if (facts.identityDependent) {
      const own = this.own.get(server)?.maybeFor(caller) ?? NONE
      const ids = new Set<CompiledRule>()
      const matched: string[] = []
      for (const id of mergeAscending(own, this.shared.maybeFor(caller))) {
        const r = this.rules[id] as CompiledRule
        if (r.dryRun || !r.servers(server) || !appliesTo(r, caller)) continue
        ids.add(r)
        matched.push(r.id)
      }
      // Equal keys filter identically: same server, same rules (ids change with rule content).
      if (matched.length > 0) key = `${key}+${digest(matched)}`
      chosen = ids
    }
    const groups = [this.own.get(server), this.shared].filter((g) => g !== undefined)
    // The indexes of one kind, found once per list (every item of a list is of one kind).
    let seen: TargetKind | undefined
    let deny: PatternIndex[] = []
    let allow: PatternIndex[] = []
    const skillRules = this.hasSkillRules(server)
    const indexes = new Map<string, PatternIndex[]>()
    const indexesOf = (side: 'allow' | 'deny', kind: TargetKind): PatternIndex[] => {
      let found = indexes.get(`${side} ${kind}`)
      if (found === undefined)
        indexes.set(`${side} ${kind}`, (found = groups.flatMap((g) => g.index(side, kind) ?? [])))
      return found
    }
    return new RuleListFilter(key, facts.identityDependent, (kind, value) => {
      const reach =
        kind === 'skill'
          ? reachOf({ kind, name: value }, skillRules)
          : kind === 'resource'
            ? reachOf({ kind, uri: value }, skillRules)
            : undefined
      if (reach !== undefined) return this.listedByReach(reach, indexesOf, server, chosen)
      if (kind !== seen) {
        seen = kind
        deny = groups.flatMap((g) => g.index('deny', kind) ?? [])
        allow = groups.flatMap((g) => g.index('allow', kind) ?? [])
      }
      // Names only (arguments are unknown): a conditional allow may apply and a conditional deny
      // may not, so neither hides (docs/policy.md §List filtering). Order does not matter here.
      for (const index of deny) if (this.listedBy(index, value, server, chosen, true)) return false
      for (const index of allow) if (this.listedBy(index, value, server, chosen, false)) return true
      return false
    })
  }

  /** Whether a list shows an item its reach decides (policy/skill-reach.ts), as listFilter does. */
  private listedByReach(
    reach: Reach,
    indexesOf: (side: 'allow' | 'deny', kind: TargetKind) => readonly PatternIndex[],
    server: string,
    chosen: ReadonlySet<CompiledRule>,
  ): boolean {
    for (const [kind, value] of reach.deny)
      for (const index of indexesOf('deny', kind))
        if (this.listedBy(index, value, server, chosen, true)) return false
    for (const [kind, value] of reach.allow)
      for (const index of indexesOf('allow', kind))
        if (this.listedBy(index, value, server, chosen, false)) return true
    return false
  }

  /** Whether some rule for `server` names skills: only then may skill rules decide a resource. */
  private hasSkillRules(server: string): boolean {
    const own = this.own.get(server)
    const shared = this.shared
    return (
      own?.index('deny', 'skill') !== undefined ||
      own?.index('allow', 'skill') !== undefined ||
      shared.index('deny', 'skill') !== undefined ||
      shared.index('allow', 'skill') !== undefined
    )
  }

  /**
   * Whether some enforced rule for the caller (`when` absent, or in `chosen`) has a pattern in
   * `index` matching `value`; `unconditional`: only rules without a condition count.
   */
  private listedBy(
    index: PatternIndex,
    value: string,
    server: string,
    chosen: ReadonlySet<CompiledRule>,
    unconditional: boolean,
  ): boolean {
    for (const id of index.lookup(value)) {
      const r = this.rules[id] as CompiledRule
      if (r.dryRun || (unconditional && r.condition !== undefined)) continue
      if ((r.when === undefined || chosen.has(r)) && r.servers(server)) return true
    }
    return false
  }

  /**
   * The rules of `side` for `server` whose patterns of `kind` match `value` and that apply to
   * `caller`, in rule order: `when` is looked at only for these.
   */
  private applying(
    side: 'allow' | 'deny',
    server: string,
    kind: TargetKind,
    value: string,
    caller: PolicyCaller | undefined,
  ): CompiledRule[] {
    const own = this.own.get(server)?.matching(side, kind, value) ?? NONE
    const out: CompiledRule[] = []
    for (const id of mergeAscending(own, this.shared.matching(side, kind, value))) {
      const r = this.rules[id] as CompiledRule
      if (r.servers(server) && appliesTo(r, caller)) out.push(r)
    }
    return out
  }

  /** applying() over several names: the rules any of `keys` finds, in rule order, each once. */
  private applyingAny(
    side: 'allow' | 'deny',
    server: string,
    keys: readonly ReachKey[],
    caller: PolicyCaller | undefined,
  ): CompiledRule[] {
    const own = this.own.get(server)
    const ids: number[] = []
    for (const [kind, value] of keys) {
      for (const id of own?.matching(side, kind, value) ?? NONE) ids.push(id)
      for (const id of this.shared.matching(side, kind, value)) ids.push(id)
    }
    const out: CompiledRule[] = []
    for (const id of ascendingOnce(ids)) {
      const r = this.rules[id] as CompiledRule
      if (r.servers(server) && appliesTo(r, caller)) out.push(r)
    }
    return out
  }

  private rulesOf(server: string): CompiledRule[] {
    return rulesOf(this.rules, this.own, this.shared, server)
  }

  private factsOf(server: string): ServerFacts {
    return this.facts.get(server) ?? factsOf(this.rules, this.own, this.shared, server)
  }
}

function appliesTo(rule: CompiledRule, caller: PolicyCaller | undefined): boolean {
  return rule.when === undefined || rule.when(caller)
}

/** The conditions a check evaluated, in the order it evaluated them. */
function resultsOf(c: Conditions | typeof NAMES_ONLY): readonly ConditionResult[] {
  return c === NAMES_ONLY ? NO_CONDITIONS : [...c.results.values()]
}

const hasCondition = (r: CompiledRule): boolean => r.condition !== undefined
const isDryRun = (r: CompiledRule): boolean => r.dryRun
const isEnforced = (r: CompiledRule): boolean => !r.dryRun

/**
 * Deny wins over allow; the first matching rule in file order is the one reported. `deny` and
 * `allow` are the rules that apply to the caller whose deny or allow patterns match the target,
 * in rule order. A rule with a condition applies only when it holds (`if` true, `unless` false);
 * a condition of a matching rule that cannot be evaluated denies the call, whatever other rules
 * say (docs/policy.md §Conditions).
 */
function evaluate(
  deny: readonly CompiledRule[],
  allow: readonly CompiledRule[],
  c: Conditions | typeof NAMES_ONLY,
): Verdict {
  for (const r of deny) {
    if (c === NAMES_ONLY) {
      if (r.condition === undefined) return { allow: false, rule: r, reason: 'deny_rule' }
      continue
    }
    const applies = c.applies(r)
    // SECURITY: a deny whose condition has no value denies.
    if (applies === 'error') return { allow: false, rule: r, reason: 'condition_error' }
    if (applies) return { allow: false, rule: r, reason: 'deny_rule' }
  }
  let allowed: Verdict | undefined
  for (const r of allow) {
    if (c === NAMES_ONLY) return { allow: true, rule: r, reason: 'allow_rule' }
    // Past the first allow only conditions are left to evaluate: an error among them still denies.
    if (allowed !== undefined && r.condition === undefined) continue
    const applies = c.applies(r)
    // SECURITY: an allow whose condition has no value denies too, not only fails to allow.
    if (applies === 'error') return { allow: false, rule: r, reason: 'condition_error' }
    if (applies) allowed ??= { allow: true, rule: r, reason: 'allow_rule' }
  }
  return allowed ?? DEFAULT_DENY
}
