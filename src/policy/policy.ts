import { compileArgumentKeys, type ArgumentKeys } from '../mcp/argument-keys.js'
import type { McpTarget } from '../mcp/classify.js'
import type { ListFilter } from '../mcp/list-filter.js'
import type { CompiledLimit } from '../limits/rules.js'
import type { PolicyCaller } from '../match/claims.js'
import type { CompiledRule, TargetKind } from './compile.js'
import { conditionInput, type ConditionInput, type ConditionKind } from './condition.js'
import { RuleListFilter } from './list-view.js'

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

interface ServerRules {
  readonly all: readonly CompiledRule[]
  readonly enforced: readonly CompiledRule[]
  readonly hasDryRun: boolean
  /** Some enforced rule for this server has `when`: what a caller sees depends on who they are. */
  readonly identityDependent: boolean
  /** Some rule for this server has `if` or `unless`: its calls' bodies must be read. */
  readonly conditional: boolean
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

/**
 * The compiled org-wide allowlist. Semantics (docs/policy.md): what no rule allows is denied; a
 * matching deny wins over any allow; a rule without `when` applies to every caller. Immutable: a
 * reload builds a new set and swaps it in whole.
 */
export class PolicySet {
  private readonly byServer = new Map<string, ServerRules>()

  constructor(
    readonly rules: readonly CompiledRule[],
    readonly mode: PolicyMode,
    /** Hash of every rule and the mode; tells reloads apart in logs. */
    readonly id: string,
    servers: Iterable<string>,
    /** `limits:` entries of the same files, in file order (docs/rate-limits.md). */
    readonly limits: readonly CompiledLimit[] = [],
  ) {
    for (const s of servers) this.byServer.set(s, this.select(s))
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
    const rules = this.rulesFor(server)
    const kind = target.kind
    const value = target.kind === 'resource' ? target.uri : target.name
    const applicable = rules.all.filter((r) => appliesTo(r, caller))
    // Without a conditional rule on this server, judging by names is the whole check (and costs
    // no per-call state): NAMES_ONLY then decides exactly as the conditions would.
    const c = rules.conditional
      ? new Conditions(() => conditionInput(caller, server, target, args))
      : NAMES_ONLY
    const conditions = (): readonly ConditionResult[] =>
      c === NAMES_ONLY ? NO_CONDITIONS : [...c.results.values()]
    if (this.mode === 'dry-run') {
      const v = evaluate(applicable, kind, value, c)
      return { ...v, allow: true, dryRun: !v.allow, conditions: conditions() }
    }
    if (!rules.hasDryRun)
      return { ...evaluate(applicable, kind, value, c), dryRun: false, conditions: conditions() }
    const enforced = evaluate(
      applicable.filter((r) => !r.dryRun),
      kind,
      value,
      c,
    )
    if (!enforced.allow) return { ...enforced, dryRun: false, conditions: conditions() }
    // A dry-run rule never changes the outcome; it only says what it would have done.
    const full = evaluate(applicable, kind, value, c)
    return full.allow
      ? { ...enforced, dryRun: false, conditions: conditions() }
      : { ...full, allow: true, dryRun: true, conditions: conditions() }
  }

  /** Whether some rule for `server` has a condition, so its calls' arguments must be read. */
  hasConditions(server: string): boolean {
    return this.rulesFor(server).conditional
  }

  /**
   * The argument keys the conditions of `server`'s rules read (mcp/argument-keys.ts), undefined
   * when it has none: the strict scanner refuses keys other readers take for them. Compiled on
   * each call, which the runtime makes once per server and config.
   */
  argumentKeys(server: string): ArgumentKeys | undefined {
    const rules = this.rulesFor(server).all
    return compileArgumentKeys(rules.flatMap((r) => (r.condition ? [r.condition.reads] : [])))
  }

  /**
   * The caller's view of list results on `server`, consistent with check(): an item is listed
   * exactly when calling it would not be blocked. Undefined in global dry run (nothing is hidden).
   */
  listFilter(caller: PolicyCaller | undefined, server: string): ListFilter | undefined {
    if (this.mode === 'dry-run') return undefined
    const rules = this.rulesFor(server)
    const matched = rules.enforced.filter((r) => appliesTo(r, caller))
    // Equal keys filter identically: same server, same rules (ids change with rule content).
    const key = JSON.stringify([server, ...matched.map((r) => r.id)])
    return new RuleListFilter(
      key,
      rules.identityDependent,
      (kind, value) => evaluate(matched, kind, value, NAMES_ONLY).allow,
    )
  }

  /** The rules whose `servers` match `server`, in file and rule order. */
  rulesFor(server: string): ServerRules {
    return this.byServer.get(server) ?? this.select(server)
  }

  private select(server: string): ServerRules {
    const all = this.rules.filter((r) => r.servers(server))
    const enforced = all.filter((r) => !r.dryRun)
    return {
      all,
      enforced,
      hasDryRun: enforced.length !== all.length,
      identityDependent: enforced.some((r) => r.when !== undefined),
      conditional: all.some((r) => r.condition !== undefined),
    }
  }
}

function appliesTo(rule: CompiledRule, caller: PolicyCaller | undefined): boolean {
  return rule.when === undefined || rule.when(caller)
}

/**
 * Deny wins over allow; the first matching rule in file order is the one reported. A rule with a
 * condition applies only when it holds (`if` true, `unless` false); a condition of a matching rule
 * that cannot be evaluated denies the call, whatever other rules say (docs/policy.md §Conditions).
 * NAMES_ONLY (lists): a conditional allow may apply and a conditional deny may not, so neither hides.
 */
function evaluate(
  rules: readonly CompiledRule[],
  kind: TargetKind,
  value: string,
  c: Conditions | typeof NAMES_ONLY,
): Verdict {
  for (const r of rules) {
    if (!r.deny[kind](value)) continue
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
  for (const r of rules) {
    if (!r.allow[kind](value)) continue
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
