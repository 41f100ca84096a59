import type { McpTarget } from '../../../src/mcp/classify.js'
import type { PolicyCaller } from '../../../src/match/claims.js'
import { compilePatterns, type Matcher } from '../../../src/match/pattern.js'
import type { CompiledRule, TargetKind } from '../../../src/policy/compile.js'
import { conditionInput, type ConditionInput } from '../../../src/policy/condition.js'
import type { ConditionResult, Decision, PolicyMode } from '../../../src/policy/policy.js'
import { reachOf, type Reach } from '../../../src/policy/skill-reach.js'

/**
 * The policy as it was decided before the index (src/policy/rule-index.ts): every rule of the
 * server scanned in rule order, for every decision and every list item. Kept here only as the
 * reference the index is tested against (policy-index.test.ts), never in src/: one mechanism
 * decides, this one checks it.
 */

type Verdict = Pick<Decision, 'allow' | 'rule' | 'reason'>

interface Scanned {
  readonly rule: CompiledRule
  readonly allow: (kind: TargetKind, value: string) => boolean
  readonly deny: (kind: TargetKind, value: string) => boolean
}

const KINDS: readonly TargetKind[] = ['tool', 'prompt', 'resource', 'event', 'skill', 'method']

function scanned(rule: CompiledRule): Scanned {
  const side = (t: CompiledRule['allow']) => {
    const m = new Map<TargetKind, Matcher>(KINDS.map((k) => [k, compilePatterns(t[k])]))
    return (kind: TargetKind, value: string) => (m.get(kind) as Matcher)(value)
  }
  return { rule, allow: side(rule.allow), deny: side(rule.deny) }
}

class Conditions {
  private input: ConditionInput | undefined
  readonly results = new Map<CompiledRule, ConditionResult>()
  constructor(private readonly read: () => ConditionInput) {}
  applies(rule: CompiledRule): boolean | 'error' {
    const condition = rule.condition
    if (condition === undefined) return true
    let result = this.results.get(rule)
    if (result === undefined) {
      this.input ??= this.read()
      result = { rule: rule.name, kind: condition.kind, ...condition.evaluate(this.input) }
      this.results.set(rule, result)
    }
    if ('error' in result) return 'error'
    return condition.kind === 'if' ? result.value : !result.value
  }
}

const NAMES_ONLY = 'names-only'

/**
 * The names whose patterns decide a target: its own, or for a skill and a resource that may be a
 * skill's file those policy/skill-reach.ts gives (asked as if every server had skill rules, which
 * changes nothing where none has: then no skill pattern of the server's rules can match).
 */
function reachOfTarget(target: McpTarget): Reach {
  const value = target.kind === 'resource' ? target.uri : target.name
  return reachOf(target, true) ?? { deny: [[target.kind, value]], allow: [[target.kind, value]] }
}

function evaluate(
  rules: readonly Scanned[],
  reach: Reach,
  c: Conditions | typeof NAMES_ONLY,
): Verdict {
  for (const s of rules) {
    const r = s.rule
    if (!reach.deny.some(([kind, value]) => s.deny(kind, value))) continue
    if (c === NAMES_ONLY) {
      if (r.condition === undefined) return { allow: false, rule: r, reason: 'deny_rule' }
      continue
    }
    const applies = c.applies(r)
    if (applies === 'error') return { allow: false, rule: r, reason: 'condition_error' }
    if (applies) return { allow: false, rule: r, reason: 'deny_rule' }
  }
  let allowed: Verdict | undefined
  for (const s of rules) {
    const r = s.rule
    if (!reach.allow.some(([kind, value]) => s.allow(kind, value))) continue
    if (c === NAMES_ONLY) return { allow: true, rule: r, reason: 'allow_rule' }
    if (allowed !== undefined && r.condition === undefined) continue
    const applies = c.applies(r)
    if (applies === 'error') return { allow: false, rule: r, reason: 'condition_error' }
    if (applies) allowed ??= { allow: true, rule: r, reason: 'allow_rule' }
  }
  return allowed ?? { allow: false, rule: undefined, reason: 'default_deny' }
}

const appliesTo = (r: CompiledRule, caller: PolicyCaller | undefined): boolean =>
  r.when === undefined || r.when(caller)

/** The linear policy over the same compiled rules. */
export class LinearPolicy {
  private readonly rules: readonly Scanned[]

  constructor(
    rules: readonly CompiledRule[],
    private readonly mode: PolicyMode,
  ) {
    this.rules = rules.map(scanned)
  }

  private forServer(server: string): Scanned[] {
    return this.rules.filter((s) => s.rule.servers(server))
  }

  check(
    caller: PolicyCaller | undefined,
    server: string,
    target: McpTarget,
    args?: unknown,
  ): Decision {
    const all = this.forServer(server)
    const conditional = all.some((s) => s.rule.condition !== undefined)
    const hasDryRun = all.some((s) => s.rule.dryRun)
    const reach = reachOfTarget(target)
    const applicable = all.filter((s) => appliesTo(s.rule, caller))
    const c = conditional
      ? new Conditions(() => conditionInput(caller, server, target, args))
      : NAMES_ONLY
    const conditions = () => (c === NAMES_ONLY ? [] : [...c.results.values()])
    if (this.mode === 'dry-run') {
      const v = evaluate(applicable, reach, c)
      return { ...v, allow: true, dryRun: !v.allow, conditions: conditions() }
    }
    if (!hasDryRun)
      return { ...evaluate(applicable, reach, c), dryRun: false, conditions: conditions() }
    const enforcedRules = applicable.filter((s) => !s.rule.dryRun)
    const enforced = evaluate(enforcedRules, reach, c)
    if (!enforced.allow) return { ...enforced, dryRun: false, conditions: conditions() }
    const full = evaluate(applicable, reach, c)
    return full.allow
      ? { ...enforced, dryRun: false, conditions: conditions() }
      : { ...full, allow: true, dryRun: true, conditions: conditions() }
  }

  /** The enforced rules a list view of `caller` on `server` is judged by (the old filter key). */
  listRules(caller: PolicyCaller | undefined, server: string): CompiledRule[] {
    return this.forServer(server)
      .filter((s) => !s.rule.dryRun && appliesTo(s.rule, caller))
      .map((s) => s.rule)
  }

  /** Whether a list of `caller` on `server` shows `value`; undefined in global dry run. */
  listed(
    caller: PolicyCaller | undefined,
    server: string,
    kind: TargetKind,
    value: string,
  ): boolean | undefined {
    if (this.mode === 'dry-run') return undefined
    const matched = this.forServer(server).filter(
      (s) => !s.rule.dryRun && appliesTo(s.rule, caller),
    )
    const target: McpTarget = kind === 'resource' ? { kind, uri: value } : { kind, name: value }
    return evaluate(matched, reachOfTarget(target), NAMES_ONLY).allow
  }

  identityDependent(server: string): boolean {
    return this.forServer(server).some((s) => !s.rule.dryRun && s.rule.when !== undefined)
  }

  hasConditions(server: string): boolean {
    return this.forServer(server).some((s) => s.rule.condition !== undefined)
  }

  rulesFor(caller: PolicyCaller | undefined, server: string): CompiledRule[] {
    return this.forServer(server)
      .filter((s) => appliesTo(s.rule, caller))
      .map((s) => s.rule)
  }
}
